package kcp_test

import (
	"testing"
	"time"

	"github.com/fleetrpc/fleet/transport"
	"github.com/fleetrpc/fleet/transport/kcp"
	"github.com/fleetrpc/fleet/transport/transporttest"
)

// TestLoss: through a relay that drops 5% of datagrams each way and
// delays each by 5 ms, every call over KCP completes within its deadline.
func TestLoss(t *testing.T) {
	transporttest.RunLoss(t, "kcp", transporttest.Options{}, transporttest.RelayConfig{Loss: 0.05, Delay: 5 * time.Millisecond, Seed: 13})
}

// BenchmarkEcho: Fleet over KCP at 100 callers, direct and through the
// lossy relay (20 ms each way; 0%, 1%, 5% loss).
func BenchmarkEcho(b *testing.B) { transporttest.BenchLinks(b, "kcp", transporttest.Options{}) }

// BenchmarkEchoFEC: as BenchmarkEcho with forward error correction (10
// data and 3 parity shards), which repairs most losses without waiting
// for a retransmission.
func BenchmarkEchoFEC(b *testing.B) {
	transport.Register("kcp-fec-bench", kcp.New(kcp.Config{DataShards: 10, ParityShards: 3}))
	transporttest.BenchLinks(b, "kcp-fec-bench", transporttest.Options{})
}
