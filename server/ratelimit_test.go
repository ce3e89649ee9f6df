package server_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/internal/testutil"
	"github.com/fleetrpc/fleet/server"
)

// TestRateLimits: over the server-wide limit, calls are refused with
// ResourceExhausted and a retry-after hint and do not run; over a method's
// limit, oneway sends wait instead of being dropped (their connection is
// not read meanwhile), and other methods are not limited by it.
func TestRateLimits(t *testing.T) {
	t.Run("server calls", func(t *testing.T) {
		// One token per 10 s: the burst of 3 runs, the rest are refused
		// however slowly the machine runs the loop.
		var ran atomic.Int64
		srv := server.New(server.WithRateLimit(0.1, 3))
		srv.RegisterFunction("A", "Echo", func(ctx context.Context, in *[]byte, out *[]byte) error {
			ran.Add(1)
			*out = *in
			return nil
		})
		c := dial(t, testutil.Serve(t, srv))
		var ok, refused int
		for range 10 {
			var back fleet.Metadata
			ctx := fleet.WithResponseMetadata(context.Background(), &back)
			var out []byte
			err := c.Call(ctx, "A", "Echo", []byte("x"), &out)
			switch {
			case err == nil:
				ok++
			case fleet.CodeOf(err) == fleet.ResourceExhausted:
				refused++
				ms, perr := strconv.Atoi(back[server.RetryAfterKey])
				if perr != nil || ms <= 0 {
					t.Fatalf("refused call's retry-after = %q, want a positive number of ms", back[server.RetryAfterKey])
				}
			default:
				t.Fatalf("call: %v", err)
			}
		}
		if ok < 3 || refused == 0 || int64(ok) != ran.Load() {
			t.Fatalf("%d calls ok, %d refused, %d ran; want >= 3 ok, some refused, only the ok ones run", ok, refused, ran.Load())
		}
	})
	t.Run("method oneway", func(t *testing.T) {
		var shipped atomic.Int64
		srv := server.New(server.WithMethodRateLimit("Log", "Ship", 500, 10))
		srv.RegisterFunction("Log", "Ship", func(ctx context.Context, in *[]byte, _ *[]byte) error {
			shipped.Add(1)
			return nil
		})
		srv.RegisterFunction("Log", "Echo", func(ctx context.Context, in *[]byte, out *[]byte) error {
			*out = *in
			return nil
		})
		addr := testutil.Serve(t, srv)
		c, other := dial(t, addr), dial(t, addr)
		const sends = 300
		for i := range sends {
			if err := c.Send(context.Background(), "Log", "Ship", []byte("line")); err != nil {
				t.Fatalf("send %d: %v", i, err)
			}
		}
		for range 50 { // another method, on another connection: not limited
			var out []byte
			if err := other.Call(context.Background(), "Log", "Echo", []byte("x"), &out); err != nil {
				t.Fatalf("unlimited method: %v", err)
			}
		}
		deadline := time.Now().Add(20 * time.Second)
		for shipped.Load() < sends && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := shipped.Load(); n != sends {
			t.Fatalf("%d of %d rate-limited oneway sends ran", n, sends)
		}
	})
}
