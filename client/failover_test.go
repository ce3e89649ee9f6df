package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/internal/testutil"
)

// TestCrashFailoverIgnoresRetryBudget: one of three servers is closed
// abruptly (listener and connections, still registered) under load, with a
// retry budget so tight (1% of calls, no minimum) that it could not pay for
// the failover of the calls in flight on it. Those failovers are not
// counted while healthy servers remain (client/failover.go), so no
// idempotent call fails, and none with ErrBudgetExhausted.
func TestCrashFailoverIgnoresRetryBudget(t *testing.T) {
	hold := func(n *node, ctx context.Context) error {
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
		}
		return nil
	}
	for run := range 3 {
		a, b, c := startNode(t, "a", hold), startNode(t, "b", hold), startNode(t, "c", hold)
		tab, _ := newTable(t, a, b, c)
		x := newX(t, tab, client.WithIdempotent("Do"),
			client.WithRetryBudget(client.NewRetryBudget(0.01, 0, 10*time.Second)))
		load := testutil.StartLoad(90, 0, func(int) error {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			return x.Call(ctx, "Do", &Req{}, &Rep{})
		})
		waitFor(t, func() bool { return c.calls.Load() >= 100 })
		c.srv.Close() // abrupt: handlers cancelled, no go-away
		after := a.calls.Load() + b.calls.Load()
		waitFor(t, func() bool { return a.calls.Load()+b.calls.Load() >= after+500 })
		ok, failed, first := load.Stop()
		if failed != 0 {
			t.Fatalf("run %d: %d of %d calls failed (budget refused: %v); first: %v",
				run, failed, ok+failed, errors.Is(first, client.ErrBudgetExhausted), first)
		}
	}
}

// waitFor polls cond every few milliseconds for up to 20 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 20 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
