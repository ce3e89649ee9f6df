package client_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/selector"
)

// funcPolicy is a PolicySource deciding every call with decide and
// recording the server lists it is given.
type funcPolicy struct {
	decide  func(ctx context.Context, method string) client.CallPolicy
	servers atomic.Int64
}

func (p *funcPolicy) Update(servers []registry.Instance) { p.servers.Store(int64(len(servers))) }
func (p *funcPolicy) Decide(ctx context.Context, method string) client.CallPolicy {
	return p.decide(ctx, method)
}

func TestPolicySource(t *testing.T) {
	a := startNode(t, "a", nil)
	b := startNode(t, "b", func(n *node, ctx context.Context) error {
		return fleet.NewError(fleet.Aborted, "b aborts")
	})
	tab, _ := newTable(t, a, b)
	var cp atomic.Pointer[client.CallPolicy]
	cp.Store(&client.CallPolicy{})
	p := &funcPolicy{decide: func(context.Context, string) client.CallPolicy { return *cp.Load() }}
	x := newX(t, tab, client.WithSelector(selector.NewRandom()), client.WithPolicy(p))
	if p.servers.Load() != 2 {
		t.Fatalf("Update saw %d servers, want 2", p.servers.Load())
	}
	call := func() error {
		var rep Rep
		return x.Call(context.Background(), "Do", &Req{}, &rep)
	}

	// Allow: only b is chosen, and Aborted is not retried by default.
	cp.Store(&client.CallPolicy{Allow: func(key string) bool { return key == b.addr }})
	for range 20 {
		if err := call(); fleet.CodeOf(err) != fleet.Aborted {
			t.Fatalf("restricted to b: %v", err)
		}
	}
	if a.calls.Load() != 0 {
		t.Fatalf("a took %d calls outside the allowed servers", a.calls.Load())
	}

	// Retry with codes: Aborted retried on a; every call succeeds.
	cp.Store(&client.CallPolicy{Retry: &client.RetryPolicy{MaxAttempts: 2, Codes: []fleet.Code{fleet.Aborted},
		Budget: client.NewRetryBudget(1, 100, time.Second)}})
	for range 20 {
		if err := call(); err != nil {
			t.Fatalf("retried on aborted: %v", err)
		}
	}

	// Fault: an injected abort fails the call before it is sent; with
	// retries it is absorbed even on a single allowed server.
	injected := fleet.NewError(fleet.Unavailable, "injected")
	var faults atomic.Int64
	fault := func(context.Context) error {
		if faults.Add(1)%2 == 1 {
			return injected
		}
		return nil
	}
	before := a.calls.Load()
	cp.Store(&client.CallPolicy{Allow: func(key string) bool { return key == a.addr }, Fault: fault,
		Retry: &client.RetryPolicy{MaxAttempts: 3, Budget: client.NewRetryBudget(1, 100, time.Second)}})
	for range 20 {
		if err := call(); err != nil {
			t.Fatalf("fault absorbed by a retry on the same server: %v", err)
		}
	}
	if got := a.calls.Load() - before; got != 20 {
		t.Fatalf("a handled %d calls, want 20 (the aborted attempts never reach it)", got)
	}
	cp.Store(&client.CallPolicy{Fault: func(context.Context) error { return injected },
		Retry: &client.RetryPolicy{MaxAttempts: 1}})
	if err := call(); !errors.Is(err, injected) {
		t.Fatalf("without retries the injected abort is the result: %v", err)
	}

	// Timeout bounds the call.
	cp.Store(&client.CallPolicy{Timeout: 20 * time.Millisecond, Allow: func(key string) bool { return key == a.addr },
		Fault: func(ctx context.Context) error { <-ctx.Done(); return fleet.FromContextError(ctx.Err()) }})
	if err := call(); fleet.CodeOf(err) != fleet.DeadlineExceeded {
		t.Fatalf("under a 20ms timeout: %v", err)
	}
}

// TestPolicyBreaker: a CallPolicy's Breaker gives its calls a breaker of
// their own on each server; one equal to the XClient's own setting is the
// server's own breaker; Disabled lets every call through.
func TestPolicyBreaker(t *testing.T) {
	b := startNode(t, "b", func(n *node, ctx context.Context) error {
		return fleet.NewError(fleet.Internal, "b fails")
	})
	tab, _ := newTable(t, b)
	var cp atomic.Pointer[client.CallPolicy]
	p := &funcPolicy{decide: func(context.Context, string) client.CallPolicy { return *cp.Load() }}
	x := newX(t, tab, client.WithPolicy(p), client.WithBreaker(client.BreakerSettings{Failures: 4, OpenFor: time.Minute}))
	calls := func(step string, n int, wantReached int64) {
		t.Helper()
		before := b.calls.Load()
		for range n {
			var rep Rep
			if err := x.Call(context.Background(), "Do", &Req{}, &rep); err == nil {
				t.Fatalf("%s: a call to the failing server succeeded", step)
			}
		}
		if got := b.calls.Load() - before; got != wantReached {
			t.Fatalf("%s: %d calls reached the server, want %d", step, got, wantReached)
		}
	}
	cp.Store(&client.CallPolicy{Breaker: &client.BreakerSettings{Failures: 2}})
	calls("failures 2", 10, 2)
	cp.Store(&client.CallPolicy{Breaker: &client.BreakerSettings{Failures: 3}})
	calls("failures 3, a new breaker", 10, 3)
	cp.Store(&client.CallPolicy{Breaker: &client.BreakerSettings{Failures: 2}})
	calls("failures 2 again: its breaker is still open", 10, 0)
	// Failures 4 with the XClient's OpenFor is the XClient's own setting:
	// the server's own breaker, which the policy's calls open and the
	// calls without a policy then find open.
	cp.Store(&client.CallPolicy{Breaker: &client.BreakerSettings{Failures: 4}})
	calls("the XClient's own setting", 10, 4)
	cp.Store(&client.CallPolicy{})
	calls("no policy: the server's own breaker, open", 10, 0)
	cp.Store(&client.CallPolicy{Breaker: &client.BreakerSettings{Disabled: true}})
	calls("disabled", 10, 10)
}
