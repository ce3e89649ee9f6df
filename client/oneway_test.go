package client_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/internal/testutil"
	"github.com/fleetrpc/fleet/server"
)

// TestCloseFlushesOnewaySends: oneway sends queued before Close all reach
// the server.
func TestCloseFlushesOnewaySends(t *testing.T) {
	var got atomic.Int64
	srv := server.New()
	srv.RegisterFunction("Log", "Write", func(ctx context.Context, in *Req, _ *struct{}) error {
		got.Add(1)
		return nil
	})
	addr := testutil.Serve(t, srv)
	const n = 2000
	for round := 0; round < 5; round++ {
		got.Store(0)
		c, err := client.Dial(context.Background(), "tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			if err := c.Send(context.Background(), "Log", "Write", &Req{N: i}); err != nil {
				t.Fatal(err)
			}
		}
		c.Close()
		deadline := time.Now().Add(5 * time.Second)
		for got.Load() < n && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if got.Load() != n {
			t.Fatalf("round %d: server got %d of %d oneway sends", round, got.Load(), n)
		}
	}
}
