package reflection_test

import (
	"context"
	"testing"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/internal/testutil"
	"github.com/fleetrpc/fleet/server"
	"github.com/fleetrpc/fleet/server/reflection"
)

// TestDescribeStreams: with Streams, Describe lists a service's streaming
// methods with their kind and message types (a service of streams only
// included), sorted with its unary ones; without it, as before, only
// unary methods, and a stream-only service is not found.
func TestDescribeStreams(t *testing.T) {
	srv := server.New()
	if err := reflection.Register(srv); err != nil {
		t.Fatal(err)
	}
	errs := []error{
		server.Handle(srv, "Mixed", "Get", func(ctx context.Context, in *Args, out *int) error { return nil }),
		server.HandleServerStream(srv, "Mixed", "Watch", func(ctx context.Context, in *Args, st *server.ServerStream[Inner]) error { return nil }),
		server.HandleBidiStream(srv, "Only", "Chat", func(ctx context.Context, st *server.BidiStream[Args, Inner]) error { return nil }),
	}
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	c := dial(t, testutil.Serve(t, srv))
	describe := func(req *reflection.DescribeRequest) ([]reflection.MethodInfo, error) {
		var d reflection.DescribeReply
		err := c.Call(context.Background(), reflection.Service, "Describe", req, &d)
		return d.Methods, err
	}
	ms, err := describe(&reflection.DescribeRequest{Service: "Mixed", Streams: true})
	if err != nil || len(ms) != 2 || ms[0].Name != "Get" || ms[0].Stream != "" || ms[1].Name != "Watch" || ms[1].Stream != "server" || ms[1].Reply.GoType != "reflection_test.Inner" {
		t.Fatalf("Mixed with streams: %+v, %v", ms, err)
	}
	if ms, err := describe(&reflection.DescribeRequest{Service: "Mixed"}); err != nil || len(ms) != 1 || ms[0].Name != "Get" {
		t.Fatalf("Mixed without streams: %+v, %v", ms, err)
	}
	if ms, err := describe(&reflection.DescribeRequest{Service: "Mixed", Method: "Watch", Streams: true}); err != nil || len(ms) != 1 || ms[0].Stream != "server" {
		t.Fatalf("Mixed.Watch: %+v, %v", ms, err)
	}
	if ms, err := describe(&reflection.DescribeRequest{Service: "Only", Streams: true}); err != nil || len(ms) != 1 || ms[0].Stream != "bidi" || ms[0].Args.GoType != "reflection_test.Args" {
		t.Fatalf("Only with streams: %+v, %v", ms, err)
	}
	if _, err := describe(&reflection.DescribeRequest{Service: "Only"}); fleet.CodeOf(err) != fleet.NotFound {
		t.Fatalf("Only without streams: %v, want not_found", err)
	}
	if _, err := describe(&reflection.DescribeRequest{Service: "Mixed", Method: "Nope", Streams: true}); fleet.CodeOf(err) != fleet.NotFound {
		t.Fatalf("Mixed.Nope: %v, want not_found", err)
	}
}
