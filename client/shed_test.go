package client_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/internal/testutil"
	"github.com/fleetrpc/fleet/server"
)

// startShedder starts a server whose Echo.Do handlers block until gate is
// closed, under an adaptive limit fixed at 2: with its two slots held,
// every further call is shed. ran counts the handlers that started.
func startShedder(t *testing.T, gate chan struct{}, ran *atomic.Int64) (*server.Server, *node) {
	t.Helper()
	srv := server.New(server.WithAdaptiveLimit(server.AdaptiveLimit{Initial: 2, Min: 2, Max: 2}))
	if err := srv.RegisterFunction("Echo", "Do", func(ctx context.Context, in *Req, out *Rep) error {
		ran.Add(1)
		out.From = "shedder"
		select {
		case <-gate:
		case <-ctx.Done():
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &node{name: "shedder", srv: srv, addr: lis.Addr().String(), done: make(chan struct{})}
	go func() { defer close(n.done); srv.Serve(lis) }()
	t.Cleanup(func() { srv.Close(); <-n.done })
	return srv, n
}

// TestShedCallFailsOver: one server sheds (its limit's slots held), the
// other has room. Calls of a method not marked idempotent, under a retry
// budget too tight to pay for the failovers, all succeed: a shed call did
// not run, so it fails over to the other server without counting against
// the budget.
func TestShedCallFailsOver(t *testing.T) {
	gate := make(chan struct{})
	var ran atomic.Int64
	shedSrv, shedder := startShedder(t, gate, &ran)
	other := startNode(t, "other", nil)
	tab, _ := newTable(t, shedder, other)
	x := newX(t, tab, client.WithRetryBudget(client.NewRetryBudget(0.01, 0, 10*time.Second)))
	load := testutil.StartLoad(16, 0, func(int) error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var rep Rep
		if err := x.Call(ctx, "Do", &Req{}, &rep); err != nil {
			return err
		}
		return nil
	})
	waitFor(t, func() bool {
		_, _, shed := shedSrv.AdaptiveLimitState()
		return shed >= 200 && other.calls.Load() >= 200
	})
	close(gate)
	ok, failed, first := load.Stop()
	if failed != 0 {
		t.Fatalf("%d of %d calls failed; first: %v", failed, ok+failed, first)
	}
	_, _, shed := shedSrv.AdaptiveLimitState()
	t.Logf("%d calls, %d shed by one server and failed over, %d ran there", ok, shed, ran.Load())
}

// TestShedErrorHint: a call refused over the adaptive limit fails with
// ResourceExhausted wrapping ErrShed, and RetryAfter reads its hint; a
// ResourceExhausted error of a handler is not a shed.
func TestShedErrorHint(t *testing.T) {
	gate := make(chan struct{})
	defer close(gate)
	var ran atomic.Int64
	shedSrv, shedder := startShedder(t, gate, &ran)
	if err := shedSrv.RegisterFunction("Echo", "Full", func(ctx context.Context, in *Req, out *Rep) error {
		return fleet.NewError(fleet.ResourceExhausted, "quota spent")
	}); err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(context.Background(), "tcp", shedder.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = c.Call(context.Background(), "Echo", "Full", &Req{}, &Rep{})
	if fleet.CodeOf(err) != fleet.ResourceExhausted || errors.Is(err, client.ErrShed) {
		t.Fatalf("handler's ResourceExhausted: %v (shed %v)", err, errors.Is(err, client.ErrShed))
	}
	if _, ok := client.RetryAfter(err); ok {
		t.Fatal("RetryAfter reports a hint for a handler's error")
	}
	for i := 0; i < 2; i++ { // take the two slots
		c.Go(context.Background(), "Echo", "Do", &Req{}, &Rep{}, nil)
	}
	waitFor(t, func() bool { return ran.Load() == 2 })
	err = c.Call(context.Background(), "Echo", "Do", &Req{}, &Rep{})
	if fleet.CodeOf(err) != fleet.ResourceExhausted || !errors.Is(err, client.ErrShed) {
		t.Fatalf("call over the limit: %v, want ResourceExhausted wrapping ErrShed", err)
	}
	if d, ok := client.RetryAfter(err); !ok || d < time.Millisecond {
		t.Fatalf("RetryAfter = %v, %v; want at least 1ms, true", d, ok)
	}
}
