package kcp_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/transport"
	"github.com/fleetrpc/fleet/transport/kcp"
	"github.com/fleetrpc/fleet/transport/transporttest"
	kcpgo "github.com/xtaci/kcp-go/v5"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// kcp-go's process-wide scheduler and packet workers.
		goleak.IgnoreTopFunction("github.com/xtaci/kcp-go/v5.(*TimedSched).run"),
		goleak.IgnoreTopFunction("github.com/xtaci/kcp-go/v5.postProcessWorker"),
		goleak.IgnoreAnyFunction("github.com/xtaci/kcp-go/v5.postProcessWorker"),
	)
}

func TestConformance(t *testing.T) {
	transporttest.Run(t, "kcp", transporttest.Options{})
}

// TestConformanceFECAndCipher runs the suite with forward error
// correction and AES on, registered under its own network name.
func TestConformanceFECAndCipher(t *testing.T) {
	transport.Register("kcp-fec", kcp.New(kcp.Config{DataShards: 10, ParityShards: 3, Key: []byte("fleet test key")}))
	transporttest.Run(t, "kcp-fec", transporttest.Options{})
}

// TestDialNoServer: KCP has no handshake of its own, but the Fleet hello
// makes a dial to a port where nothing listens fail with Unavailable.
func TestDialNoServer(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().String()
	pc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err = client.Dial(ctx, "kcp", addr)
	if fleet.CodeOf(err) != fleet.Unavailable {
		t.Fatalf("dial: %v, want Unavailable", err)
	}
}

// TestCipherMismatch: a client with another key never completes the
// hello (its packets fail the server's check) and fails with Unavailable.
func TestCipherMismatch(t *testing.T) {
	s := transporttest.StartServer(t, "kcp", transporttest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := kcp.New(kcp.Config{Key: []byte("wrong")}).Dial(ctx, s.Addr)
	if fleet.CodeOf(err) != fleet.Unavailable {
		t.Fatalf("dial with another key: %v, want Unavailable", err)
	}
}

// TestStrangers: random datagrams, and a KCP peer that does not say the
// Fleet hello, reach no Fleet connection and do not disturb a client
// calling at the same time.
func TestStrangers(t *testing.T) {
	transporttest.RunStrangers(t, "kcp", transporttest.Options{}, transporttest.Strangers{
		Seed: 1,
		Peer: func(t testing.TB, addr string, stop <-chan struct{}) {
			for {
				select {
				case <-stop:
					return
				default:
				}
				blk, _ := kcpgo.NewNoneBlockCrypt(nil)
				sess, err := kcpgo.DialWithOptions(addr, blk, 0, 0)
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = sess.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
				time.Sleep(20 * time.Millisecond)
				sess.Close()
			}
		},
	})
}
