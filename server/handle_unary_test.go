package server_test

import (
	"context"
	"strings"
	"testing"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/internal/benchpb"
	"github.com/fleetrpc/fleet/internal/testutil"
	"github.com/fleetrpc/fleet/server"
	"google.golang.org/protobuf/proto"
)

// TestHandleUnary serves functions returning their reply: a protobuf
// message (moved field by field, repeated fields included), a Go type
// (assigned), a nil reply (the zero reply) and an error (its code and
// message reach the caller), and checks that interceptors see the reply
// the function returned.
func TestHandleUnary(t *testing.T) {
	seen := make(chan any, 8)
	srv := server.New(server.WithInterceptor(server.UnaryInterceptorFunc(func(next server.UnaryFunc) server.UnaryFunc {
		return func(ctx context.Context, info *fleet.CallInfo, args, reply any) error {
			err := next(ctx, info, args, reply)
			if m, ok := reply.(*benchpb.BenchmarkMessage); ok {
				seen <- m.GetField1()
			}
			return err
		}
	})))
	want := benchpb.New()
	want.Field1 = proto.String("moved")
	want.Field5 = []uint64{1, 2, 3}
	steps := []error{
		server.HandleUnary(srv, "U", "Proto", func(ctx context.Context, in *benchpb.BenchmarkMessage) (*benchpb.BenchmarkMessage, error) {
			return want, nil
		}),
		server.HandleUnary(srv, "U", "Go", func(ctx context.Context, in *Msg) (*Msg, error) {
			return &Msg{S: "go:" + in.S}, nil
		}),
		server.HandleUnary(srv, "U", "Nil", func(ctx context.Context, in *Msg) (*Msg, error) {
			return nil, nil
		}),
		server.HandleUnary(srv, "U", "Fail", func(ctx context.Context, in *Msg) (*Msg, error) {
			return &Msg{S: "ignored"}, fleet.NewError(fleet.FailedPrecondition, "not now")
		}),
	}
	for _, err := range steps {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := server.HandleUnary[Msg, Msg](srv, "U", "NilFn", nil); err == nil {
		t.Fatal("HandleUnary with a nil function succeeded")
	}
	if err := server.HandleUnary(srv, "U", "Go", func(ctx context.Context, in *Msg) (*Msg, error) { return in, nil }); err == nil {
		t.Fatal("HandleUnary of a taken name succeeded")
	}
	addr := testutil.Serve(t, srv)
	c := dial(t, addr)
	ctx := context.Background()

	got := new(benchpb.BenchmarkMessage)
	if err := c.Call(ctx, "U", "Proto", benchpb.New(), got); err != nil || !proto.Equal(got, want) {
		t.Fatalf("Proto: %v, equal %v", err, proto.Equal(got, want))
	}
	if s := <-seen; s != "moved" {
		t.Fatalf("interceptor saw reply field1 %q, want moved", s)
	}
	jc := dial(t, addr, client.WithCodec(codec.JSON))
	out := Msg{S: "stale"}
	if err := jc.Call(ctx, "U", "Nil", &Msg{S: "x"}, &out); err != nil || out.S != "" {
		t.Fatalf("Nil: %v, reply %q, want the zero reply", err, out.S)
	}
	if err := jc.Call(ctx, "U", "Go", &Msg{S: "x"}, &out); err != nil || out.S != "go:x" {
		t.Fatalf("Go: %v %q", err, out.S)
	}
	err := jc.Call(ctx, "U", "Fail", &Msg{}, &out)
	if fleet.CodeOf(err) != fleet.FailedPrecondition || !strings.Contains(err.Error(), "not now") {
		t.Fatalf("Fail: %v", err)
	}
}
