package server_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/internal/testutil"
	"github.com/fleetrpc/fleet/server"
)

// TestOnewayFloodIsBounded: a client floods oneway sends at handlers that
// are stuck. The server stops reading once its handlers hold 1 MiB of
// requests, instead of starting a handler per frame, and every send is
// handled once the handlers are released.
func TestOnewayFloodIsBounded(t *testing.T) {
	release := make(chan struct{})
	var running, peak, handled atomic.Int64
	srv := server.New(server.WithMaxPendingBytesPerConn(1 << 20))
	srv.RegisterFunction("Log", "Ship", func(ctx context.Context, in *[]byte, _ *struct{}) error {
		n := running.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		<-release
		running.Add(-1)
		handled.Add(1)
		return nil
	})
	addr := testutil.Serve(t, srv)
	c := dial(t, addr, client.WithWriteTimeout(0))
	const sends = 400
	payload := make([]byte, 60<<10)
	sent := make(chan error, 1)
	go func() {
		for i := 0; i < sends; i++ {
			if err := c.Send(context.Background(), "Log", "Ship", payload); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	time.Sleep(500 * time.Millisecond)
	// 1 MiB over 64 KiB frame buffers: at most 16 handlers, plus the one
	// frame read before the bound was seen.
	if p := peak.Load(); p > 17 {
		t.Fatalf("%d handlers held requests at once, want <= 17 under a 1 MiB bound", p)
	}
	if peak.Load() == 0 {
		t.Fatal("no handler ran")
	}
	close(release)
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for handled.Load() < sends && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if handled.Load() != sends {
		t.Fatalf("%d of %d sends handled", handled.Load(), sends)
	}
}
