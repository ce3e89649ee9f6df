package server_test

import (
	"context"
	"io"
	"slices"
	"sync"
	"testing"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/codec"
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

// TestCallRefusedHookEveryRoute: calls that Invoke and InvokeStream (the
// gateway's routes) and native stream opens refuse before a handler runs
// reach the hook with the caller's code, as native calls do: no token,
// an unknown method, over the rate limit.
func TestCallRefusedHookEveryRoute(t *testing.T) {
	r := &refusals{}
	srv := server.New(server.WithPlugin(r), server.WithRateLimit(1, 1),
		server.WithAuth(func(ctx context.Context, info *fleet.CallInfo, token string) error {
			if token != "t" {
				return fleet.NewError(fleet.Unauthenticated, "no")
			}
			return nil
		}))
	if err := srv.RegisterName("Arith", new(Arith)); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	good := fleet.Metadata{fleet.AuthKey: "t"}
	call := func(method string, md fleet.Metadata) error {
		_, _, err := srv.Invoke(ctx, &server.Call{Service: "Arith", Method: method, Codec: codec.Get(codec.JSON), Payload: []byte(`{"A":1,"B":2}`), Metadata: md})
		return err
	}
	if err := call("Multiply", nil); fleet.CodeOf(err) != fleet.Unauthenticated {
		t.Fatalf("no token: %v", err)
	}
	if err := call("Nope", good); fleet.CodeOf(err) != fleet.NotFound {
		t.Fatalf("unknown method: %v", err)
	}
	// The burst of 1 went to Nope (limits come before the lookup).
	if err := call("Multiply", good); fleet.CodeOf(err) != fleet.ResourceExhausted {
		t.Fatalf("over the rate limit: %v", err)
	}
	_, err := srv.InvokeStream(ctx, &server.StreamCall{Service: "Feed", Method: "Watch", Codec: codec.Get(codec.JSON),
		Recv: func() ([]byte, error) { return nil, io.EOF }, Send: func([]byte) error { return nil }})
	if fleet.CodeOf(err) != fleet.Unauthenticated {
		t.Fatalf("stream without token: %v", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	want := []string{"Arith.Multiply:unauthenticated", "Arith.Nope:not_found", "Arith.Multiply:resource_exhausted", "Feed.Watch:unauthenticated"}
	if !slices.Equal(r.got, want) {
		t.Fatalf("refusals = %q, want %q", r.got, want)
	}
}
