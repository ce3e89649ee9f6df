package server_test

import (
	"context"
	"net"
	"testing"

	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/internal/benchpb"
	"github.com/fleetrpc/fleet/server"
)

// echoByPointer and echoByValue are the echo service with a pointer and a
// value receiver; BenchmarkRegistration compares them with Handle.
type echoByPointer struct{}

func (*echoByPointer) Say(ctx context.Context, args *benchpb.BenchmarkMessage, reply *benchpb.BenchmarkMessage) error {
	benchpb.Echo(reply, args)
	return nil
}

type echoByValue struct{}

func (echoByValue) Say(ctx context.Context, args *benchpb.BenchmarkMessage, reply *benchpb.BenchmarkMessage) error {
	benchpb.Echo(reply, args)
	return nil
}

// registrations are the three ways to serve Hello.Say.
var registrations = []struct {
	name     string
	register func(*server.Server) error
}{
	{"typed", func(s *server.Server) error {
		return server.Handle(s, "Hello", "Say", func(ctx context.Context, args *benchpb.BenchmarkMessage, reply *benchpb.BenchmarkMessage) error {
			benchpb.Echo(reply, args)
			return nil
		})
	}},
	{"pointer", func(s *server.Server) error { return s.RegisterName("Hello", &echoByPointer{}) }},
	{"value", func(s *server.Server) error { return s.RegisterName("Hello", echoByValue{}) }},
}

// BenchmarkRegistration is Hello.Say with the 581-byte BenchmarkMessage
// (protobuf) over loopback TCP, GOMAXPROCS×64 callers on one connection,
// for a typed Handle, a pointer receiver and a value receiver. Allocations
// count the client and the server (same process).
//
//	go test -run '^$' -bench Registration -benchmem ./server/
func BenchmarkRegistration(b *testing.B) {
	for _, r := range registrations {
		b.Run(r.name, func(b *testing.B) {
			srv := server.New()
			if err := r.register(srv); err != nil {
				b.Fatal(err)
			}
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			go srv.Serve(lis)
			defer srv.Close()
			c, err := client.Dial(context.Background(), "tcp", lis.Addr().String(), client.WithCodec(codec.Protobuf))
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			args := benchpb.New()
			b.SetParallelism(64)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for pb.Next() {
					var reply benchpb.BenchmarkMessage
					if err := c.Call(ctx, "Hello", "Say", args, &reply); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
