package gateway_test

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"

	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/gateway"
	"github.com/fleetrpc/fleet/internal/benchpb"
	"github.com/fleetrpc/fleet/internal/demo"
	"github.com/fleetrpc/fleet/server"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
)

// The benchmarks compare, in one run, the native path served by
// server.Serve and by gateway.Serve, and gRPC served by a grpc-go server
// and by the gateway (the same grpc-go client):
//
//	go test -run '^$' -bench . -benchtime 3s ./gateway/

func benchServer(b *testing.B) *server.Server {
	srv := server.New(server.WithLogger(discard()))
	if err := srv.Register(&demo.Hello{}); err != nil {
		b.Fatal(err)
	}
	return srv
}

// grpcGoServer serves desc from grpc-go's own server on a loopback port
// (desc's handlers ignore the implementation value), stopped when the
// benchmark ends, and returns its address.
func grpcGoServer(b *testing.B, desc *grpc.ServiceDesc) string {
	gs := grpc.NewServer()
	gs.RegisterService(desc, struct{}{})
	lis := listen(b)
	go func() { _ = gs.Serve(lis) }()
	b.Cleanup(gs.Stop)
	return lis.Addr().String()
}

func listen(b *testing.B) net.Listener {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	return lis
}

func BenchmarkNativeEcho(b *testing.B) {
	run := func(b *testing.B, addr string) {
		c, err := client.Dial(context.Background(), "tcp", addr, client.WithCodec(codec.Protobuf))
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		in := benchpb.New()
		b.SetParallelism(100) // 100 callers per GOMAXPROCS
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			out := new(benchpb.BenchmarkMessage)
			for pb.Next() {
				if err := c.Call(context.Background(), "Hello", "Say", in, out); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	b.Run("server.Serve", func(b *testing.B) {
		srv := benchServer(b)
		lis := listen(b)
		go func() { _ = srv.Serve(lis) }()
		defer srv.Close()
		run(b, lis.Addr().String())
	})
	b.Run("gateway.Serve", func(b *testing.B) {
		g := gateway.New(benchServer(b), gateway.WithLogger(discard()))
		lis := listen(b)
		go func() { _ = g.Serve(lis) }()
		defer g.Close()
		run(b, lis.Addr().String())
	})
}

// helloDesc is what protoc-gen-go-grpc would generate for pb.Hello.
var helloDesc = grpc.ServiceDesc{
	ServiceName: "pb.Hello",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Say",
		Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := new(benchpb.BenchmarkMessage)
			if err := dec(in); err != nil {
				return nil, err
			}
			out := new(benchpb.BenchmarkMessage)
			benchpb.Echo(out, in)
			return out, nil
		},
	}},
}

func BenchmarkGRPCEcho(b *testing.B) {
	run := func(b *testing.B, addr string) {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		defer cc.Close()
		in := benchpb.New()
		b.SetParallelism(100)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			out := new(benchpb.BenchmarkMessage)
			for pb.Next() {
				if err := cc.Invoke(context.Background(), "/pb.Hello/Say", in, out); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	b.Run("grpc-go", func(b *testing.B) { run(b, grpcGoServer(b, &helloDesc)) })
	b.Run("gateway", func(b *testing.B) {
		g := gateway.New(benchServer(b), gateway.WithLogger(discard()))
		lis := listen(b)
		done := make(chan error, 1)
		go func() { done <- g.Serve(lis) }()
		run(b, lis.Addr().String())
		g.Close()
		if err := <-done; !errors.Is(err, gateway.ErrClosed) {
			b.Error(err)
		}
	})
}

// listDesc is what protoc-gen-go-grpc would generate for a server stream
// pb.Feed.List: the client sends one message whose Field2 is a count, the
// server sends it back that many times.
var listDesc = grpc.ServiceDesc{
	ServiceName: "pb.Feed",
	HandlerType: (*any)(nil),
	Streams: []grpc.StreamDesc{{
		StreamName:    "List",
		ServerStreams: true,
		Handler: func(_ any, ss grpc.ServerStream) error {
			in := new(benchpb.BenchmarkMessage)
			if err := ss.RecvMsg(in); err != nil {
				return err
			}
			for range in.GetField2() {
				if err := ss.SendMsg(in); err != nil {
					return err
				}
			}
			return nil
		},
	}},
}

// BenchmarkGRPCServerStream receives b.N 581-byte messages on one gRPC
// server stream, from a grpc-go server and from a Fleet stream handler
// behind the gateway (the same grpc-go client):
//
//	go test -run '^$' -bench GRPCServerStream -benchtime 200000x ./gateway/
func BenchmarkGRPCServerStream(b *testing.B) {
	run := func(b *testing.B, addr string) {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		defer cc.Close()
		in := benchpb.New()
		in.Field2 = proto.Int32(int32(b.N))
		b.ResetTimer()
		cs, err := cc.NewStream(context.Background(), &grpc.StreamDesc{ServerStreams: true}, "/pb.Feed/List")
		if err != nil {
			b.Fatal(err)
		}
		if err := cs.SendMsg(in); err != nil {
			b.Fatal(err)
		}
		if err := cs.CloseSend(); err != nil {
			b.Fatal(err)
		}
		out := new(benchpb.BenchmarkMessage)
		n := 0
		for ; ; n++ {
			if err := cs.RecvMsg(out); err != nil {
				if err != io.EOF {
					b.Fatal(err)
				}
				break
			}
		}
		if n != b.N {
			b.Fatalf("received %d of %d", n, b.N)
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	}
	b.Run("grpc-go", func(b *testing.B) { run(b, grpcGoServer(b, &listDesc)) })
	b.Run("gateway", func(b *testing.B) {
		srv := benchServer(b)
		if err := server.HandleServerStream(srv, "Feed", "List", func(ctx context.Context, in *benchpb.BenchmarkMessage, st *server.ServerStream[benchpb.BenchmarkMessage]) error {
			for range in.GetField2() {
				if err := st.Send(in); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		g := gateway.New(srv, gateway.WithLogger(discard()))
		lis := listen(b)
		done := make(chan error, 1)
		go func() { done <- g.Serve(lis) }()
		run(b, lis.Addr().String())
		g.Close()
		if err := <-done; !errors.Is(err, gateway.ErrClosed) {
			b.Error(err)
		}
	})
}
