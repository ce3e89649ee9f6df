package server_test

import (
	"context"
	"sync"
	"testing"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/server"
)

type refusals struct {
	mu  sync.Mutex
	got []string
}

func (r *refusals) OnCallRefused(service, method string, err *fleet.Error) {
	r.mu.Lock()
	r.got = append(r.got, service+"."+method+":"+fleet.CodeOf(err).String())
	r.mu.Unlock()
}

// TestCallRefusedHook: a call to an unknown method is reported to the hook
// with the code the caller gets; a served call is not; Options installs
// several options at once.
func TestCallRefusedHook(t *testing.T) {
	r := &refusals{}
	var intercepted int
	var mu sync.Mutex
	ic := around(func(ctx context.Context, info *fleet.CallInfo, args, reply any, next server.UnaryFunc) error {
		mu.Lock()
		intercepted++
		mu.Unlock()
		return next(ctx, info, args, reply)
	})
	_, _, addr := newServer(t, server.Options(server.WithPlugin(r), nil, server.WithInterceptor(ic)))
	c := dial(t, addr)
	var reply int
	if err := c.Call(context.Background(), "Arith", "Multiply", &Args{A: 6, B: 7}, &reply); err != nil || reply != 42 {
		t.Fatalf("Multiply: %v %d", err, reply)
	}
	err := c.Call(context.Background(), "Arith", "Nope", &Args{}, &reply)
	if fleet.CodeOf(err) != fleet.NotFound {
		t.Fatalf("unknown method: %v", err)
	}
	r.mu.Lock()
	got := append([]string(nil), r.got...)
	r.mu.Unlock()
	if len(got) != 1 || got[0] != "Arith.Nope:not_found" {
		t.Fatalf("refusals = %q, want [Arith.Nope:not_found]", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if intercepted != 1 {
		t.Fatalf("interceptor ran %d times, want 1", intercepted)
	}
}
