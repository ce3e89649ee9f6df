package reflection_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/internal/benchpb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Arith is written for net/rpc: the pointer-receiver form without a
// context.
type Args struct{ A, B int }
type Quotient struct{ Quo, Rem int }
type Arith int

func (t *Arith) Multiply(args *Args, reply *int) error {
	*reply = args.A * args.B
	return nil
}

func (t *Arith) Divide(args *Args, quo *Quotient) error {
	if args.B == 0 {
		return errors.New("divide by zero")
	}
	quo.Quo, quo.Rem = args.A/args.B, args.A%args.B
	return nil
}

// Svc has the context form, with built-in and empty struct types.
type Svc struct{}

type Msg struct{ S string }

func (Svc) Echo(_ context.Context, in *Msg, out *Msg) error { out.S = in.S; return nil }

func (Svc) Sleep(_ context.Context, d *time.Duration, out *string) error {
	*out = d.String()
	return nil
}

func (Svc) Note(context.Context, *Msg, *struct{}) error { return nil }

// Hello takes and returns a generated protobuf message.
type Hello struct{}

func (Hello) Say(_ context.Context, in *benchpb.BenchmarkMessage, out *benchpb.BenchmarkMessage) error {
	proto.Merge(out, in)
	out.Field1 = proto.String("OK")
	return nil
}

// valueRecv is registered by value.
type valueRecv struct{ prefix string }

func (v valueRecv) Greet(_ context.Context, in *Msg, out *Msg) error {
	out.S = v.prefix + in.S
	return nil
}

func dial(t *testing.T, addr string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.Dial(context.Background(), "tcp", addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
