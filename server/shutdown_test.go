package server_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/internal/testutil"
	"github.com/fleetrpc/fleet/server"
	"go.uber.org/goleak"
)

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestShutdownUnderLoadLosesNothing: 50 callers keep calling a handler
// that takes a few milliseconds while the server shuts down. Every call the
// server ran is answered with success; every other call fails with an
// error that says it was not run (ShuttingDown or not sent), never with a
// lost connection.
func TestShutdownUnderLoadLosesNothing(t *testing.T) {
	var handled atomic.Int64
	srv := server.New()
	srv.RegisterFunction("S", "Work", func(ctx context.Context, in *Msg, out *Msg) error {
		time.Sleep(3 * time.Millisecond)
		handled.Add(1)
		out.S = in.S
		return nil
	})
	addr := testutil.Serve(t, srv)
	clients := make([]*client.Client, 4)
	for i := range clients {
		clients[i] = dial(t, addr)
	}
	// Calls refused as not run count as successes of the load; only the
	// others are failures.
	var refused atomic.Int64
	load := testutil.StartLoad(50, 0, func(i int) error {
		err := clients[i%len(clients)].Call(context.Background(), "S", "Work", &Msg{"x"}, &Msg{})
		if fleet.CodeOf(err) == fleet.ShuttingDown || errors.Is(err, client.ErrNotSent) {
			refused.Add(1)
			return nil
		}
		return err
	})
	time.Sleep(100 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	ok, lost, first := load.Stop()
	if lost > 0 {
		t.Fatalf("%d calls lost: first %v", lost, first)
	}
	served := ok - refused.Load()
	if served == 0 || served != handled.Load() {
		t.Fatalf("%d calls succeeded, %d handled", served, handled.Load())
	}
	t.Logf("%d calls served, %d refused as not run", served, refused.Load())
}

func TestShutdownReturnsAtDeadlineWithStuckHandler(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	srv := server.New()
	started := make(chan struct{})
	srv.RegisterFunction("S", "Stuck", func(ctx context.Context, in *Msg, out *Msg) error {
		close(started)
		<-release
		return nil
	})
	addr := testutil.Serve(t, srv)
	c := dial(t, addr)
	call := c.Go(context.Background(), "S", "Stuck", &Msg{}, &Msg{}, nil)
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := srv.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want DeadlineExceeded", err)
	}
	select {
	case <-call.Done:
		if fleet.CodeOf(call.Error) != fleet.Unavailable {
			t.Fatalf("stuck call: %v", call.Error)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("stuck call not failed after forced shutdown")
	}
}

// TestGoroutinesReturnToBaseline: after clients close, every goroutine the
// server and clients started is gone.
func TestGoroutinesReturnToBaseline(t *testing.T) {
	base := goleak.IgnoreCurrent()
	srv := server.New()
	srv.RegisterName("Svc", &Svc{})
	addr := testutil.Serve(t, srv)
	func() {
		var cs []*client.Client
		for i := 0; i < 10; i++ {
			c, err := client.Dial(context.Background(), "tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			cs = append(cs, c)
			var wg sync.WaitGroup
			for j := 0; j < 20; j++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c.Call(context.Background(), "Svc", "Echo", &Msg{"x"}, &Msg{})
				}()
			}
			wg.Wait()
		}
		for _, c := range cs {
			c.Close()
		}
	}()
	// The server's accept loop is the only goroutine left of this test,
	// with handler goroutines idle in the server's bounded reuse pool
	// (they end when the server stops: below).
	goleak.VerifyNone(t, base, goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreTopFunction("github.com/fleetrpc/fleet/server.idleWait"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, base, goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"))
}

// idleHandlers counts the handler goroutines waiting in the server's reuse
// pool: parked in a channel receive with idleWait on top of the stack.
func idleHandlers() int {
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		lines := strings.SplitN(g, "\n", 3)
		if len(lines) >= 2 && strings.Contains(lines[0], "[chan receive") &&
			strings.HasPrefix(lines[1], "github.com/fleetrpc/fleet/server.idleWait(") {
			n++
		}
	}
	return n
}

// TestIdleHandlersBounded: after a burst of 1200 concurrent calls, at most
// 1024 handler goroutines stay for reuse, and none after Shutdown.
func TestIdleHandlersBounded(t *testing.T) {
	const burst, bound = 1200, 1024
	release := make(chan struct{})
	var started sync.WaitGroup
	started.Add(burst)
	srv := server.New()
	if err := server.Handle(srv, "B", "Wait", func(ctx context.Context, in *Msg, out *Msg) error {
		started.Done()
		<-release
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	addr := testutil.Serve(t, srv)
	c := dial(t, addr)
	calls := make([]*client.Call, burst)
	for i := range calls {
		calls[i] = c.Go(context.Background(), "B", "Wait", &Msg{}, &Msg{}, nil)
	}
	started.Wait() // all the burst's handlers run at once
	close(release)
	for _, call := range calls {
		<-call.Done
		if call.Error != nil {
			t.Fatal(call.Error)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		n := idleHandlers()
		if n > 0 && n <= bound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d idle handler goroutines, want 1 to %d", n, bound)
		}
		time.Sleep(10 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	for idleHandlers() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d idle handler goroutines after Shutdown", idleHandlers())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
