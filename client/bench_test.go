package client_test

import (
	"context"
	"net"
	"testing"

	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/internal/benchpb"
	"github.com/fleetrpc/fleet/internal/demo"
	"github.com/fleetrpc/fleet/server"
)

func benchServer(b *testing.B) string {
	b.Helper()
	srv := server.New()
	if err := srv.Register(&demo.Hello{}); err != nil {
		b.Fatal(err)
	}
	if err := srv.Register(demo.Arith{}); err != nil {
		b.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(lis)
	b.Cleanup(func() { srv.Close() })
	return lis.Addr().String()
}

// BenchmarkCall is one caller making Hello.Say calls with the 581-byte
// BenchmarkMessage over loopback, one at a time.
func BenchmarkCall(b *testing.B) {
	c, err := client.Dial(context.Background(), "tcp", benchServer(b))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	args := benchpb.New()
	var reply benchpb.BenchmarkMessage
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		reply.Reset()
		if err := c.Call(ctx, "Hello", "Say", args, &reply); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCallParallel is GOMAXPROCS×64 callers sharing one connection.
func BenchmarkCallParallel(b *testing.B) {
	c, err := client.Dial(context.Background(), "tcp", benchServer(b))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	args := benchpb.New()
	ctx := context.Background()
	b.ReportAllocs()
	b.SetParallelism(64)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var reply benchpb.BenchmarkMessage
		for pb.Next() {
			reply.Reset()
			if err := c.Call(ctx, "Hello", "Say", args, &reply); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
