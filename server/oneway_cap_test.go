package server_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/internal/testutil"
	"github.com/fleetrpc/fleet/server"
)

// TestOnewayOverCapIsNotDropped: oneway sends beyond the per-connection
// concurrency cap wait for a handler slot (the server stops reading the
// connection) instead of vanishing: every send runs, and no more than the
// cap run at once.
func TestOnewayOverCapIsNotDropped(t *testing.T) {
	for _, tc := range []struct {
		cap, sends int
		hold       time.Duration
	}{
		{50, 2000, 2 * time.Millisecond},
		{1000, 12000, 100 * time.Millisecond},
	} {
		t.Run(fmt.Sprintf("cap=%d/sends=%d", tc.cap, tc.sends), func(t *testing.T) {
			var running, peak, handled atomic.Int64
			srv := server.New(server.WithMaxConcurrentPerConn(tc.cap))
			srv.RegisterFunction("Log", "Ship", func(ctx context.Context, in *[]byte, _ *[]byte) error {
				n := running.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				time.Sleep(tc.hold)
				running.Add(-1)
				handled.Add(1)
				return nil
			})
			addr := testutil.Serve(t, srv)
			c := dial(t, addr, client.WithWriteTimeout(0))
			line := []byte("a log line")
			for i := 0; i < tc.sends; i++ {
				if err := c.Send(context.Background(), "Log", "Ship", line); err != nil {
					t.Fatalf("send %d: %v", i, err)
				}
			}
			deadline := time.Now().Add(25 * time.Second)
			for handled.Load() < int64(tc.sends) && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if h := handled.Load(); h != int64(tc.sends) {
				t.Fatalf("%d of %d oneway sends ran", h, tc.sends)
			}
			if p := peak.Load(); p > int64(tc.cap) {
				t.Fatalf("%d handlers ran at once, over the cap of %d", p, tc.cap)
			}
		})
	}
}
