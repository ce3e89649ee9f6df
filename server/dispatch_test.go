package server

import (
	"context"
	"testing"

	"github.com/fleetrpc/fleet/internal/benchpb"
)

type dispatchEcho struct{}

func (*dispatchEcho) Say(ctx context.Context, args *benchpb.BenchmarkMessage, reply *benchpb.BenchmarkMessage) error {
	benchpb.Echo(reply, args)
	return nil
}

type dispatchEchoValue struct{}

func (dispatchEchoValue) Say(ctx context.Context, args *benchpb.BenchmarkMessage, reply *benchpb.BenchmarkMessage) error {
	benchpb.Echo(reply, args)
	return nil
}

// BenchmarkDispatch is the server's per-call dispatch alone (new args, new
// reply, invoke), without codec or network, for the three registrations
// and HandleUnary (Returning: the handler allocates its reply, which is
// moved into the server's).
//
//	go test -run '^$' -bench Dispatch -benchmem ./server/
func BenchmarkDispatch(b *testing.B) {
	s := New()
	if err := Handle(s, "Typed", "Say", (&dispatchEcho{}).Say); err != nil {
		b.Fatal(err)
	}
	if err := s.RegisterName("Pointer", &dispatchEcho{}); err != nil {
		b.Fatal(err)
	}
	if err := s.RegisterName("Value", dispatchEchoValue{}); err != nil {
		b.Fatal(err)
	}
	if err := HandleUnary(s, "Returning", "Say", func(ctx context.Context, args *benchpb.BenchmarkMessage) (*benchpb.BenchmarkMessage, error) {
		out := new(benchpb.BenchmarkMessage)
		benchpb.Echo(out, args)
		return out, nil
	}); err != nil {
		b.Fatal(err)
	}
	src := benchpb.New()
	for _, name := range []string{"Typed", "Pointer", "Value", "Returning"} {
		m := (*s.services.Load())[name].methods["Say"]
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				args, reply := m.newCall()
				*args.(*benchpb.BenchmarkMessage) = benchpb.BenchmarkMessage{Field1: src.Field1}
				if err := m.invoke(ctx, args, reply); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
