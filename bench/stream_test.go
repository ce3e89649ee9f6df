package bench_test

import (
	"context"
	"io"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/internal/benchpb"
	"github.com/fleetrpc/fleet/internal/demo"
	"github.com/fleetrpc/fleet/server"
)

// Stream benchmarks: Fleet streams against grpc-go streams, one
// connection over loopback, the 581-byte BenchmarkMessage (protobuf).
//
//	go test -run XXX -bench BenchmarkStream -benchtime 200000x ./bench/
//
// ServerStream: the server sends b.N messages on one stream; the client
// receives them. BidiEcho: the client sends b.N messages from one
// goroutine and receives the b.N echoes on another. Each reports msgs/s
// and MB/s of message payload.

func reportStream(b *testing.B) {
	msgs := float64(b.N) / b.Elapsed().Seconds()
	b.ReportMetric(msgs, "msgs/s")
	b.ReportMetric(msgs*float64(proto.Size(benchpb.New()))/1e6, "MB/s")
}

func fleetStreamServer(b *testing.B) *client.Client {
	b.Helper()
	srv := server.New()
	err := server.HandleServerStream(srv, "Bench", "Feed", func(ctx context.Context, req *benchpb.BenchmarkMessage, st *server.ServerStream[benchpb.BenchmarkMessage]) error {
		msg := benchpb.New()
		for i := int32(0); i < req.GetField2(); i++ {
			if err := st.Send(msg); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	err = server.HandleBidiStream(srv, "Bench", "Echo", func(ctx context.Context, st *server.BidiStream[benchpb.BenchmarkMessage, benchpb.BenchmarkMessage]) error {
		for {
			m, err := st.Receive()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			if err := st.Send(m); err != nil {
				return err
			}
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.Register(&demo.Hello{}); err != nil {
		b.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(lis)
	c, err := client.Dial(context.Background(), "tcp", lis.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close(); srv.Close() })
	return c
}

type grpcStreamSvc struct{}

var grpcStreamDesc = grpc.ServiceDesc{
	ServiceName: "bench.Stream",
	HandlerType: (*any)(nil),
	Streams: []grpc.StreamDesc{
		{StreamName: "Feed", ServerStreams: true, Handler: func(_ any, st grpc.ServerStream) error {
			req := new(benchpb.BenchmarkMessage)
			if err := st.RecvMsg(req); err != nil {
				return err
			}
			msg := benchpb.New()
			for i := int32(0); i < req.GetField2(); i++ {
				if err := st.SendMsg(msg); err != nil {
					return err
				}
			}
			return nil
		}},
		{StreamName: "Echo", ServerStreams: true, ClientStreams: true, Handler: func(_ any, st grpc.ServerStream) error {
			for {
				m := new(benchpb.BenchmarkMessage)
				if err := st.RecvMsg(m); err == io.EOF {
					return nil
				} else if err != nil {
					return err
				}
				if err := st.SendMsg(m); err != nil {
					return err
				}
			}
		}},
	},
}

func grpcStreamConn(b *testing.B) *grpc.ClientConn {
	b.Helper()
	srv := grpc.NewServer()
	srv.RegisterService(&grpcStreamDesc, grpcStreamSvc{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(lis)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cc.Close(); srv.Stop() })
	return cc
}

func BenchmarkStream(b *testing.B) {
	b.Run("ServerStream/fleet", func(b *testing.B) {
		c := fleetStreamServer(b)
		req := benchpb.New()
		req.Field2 = proto.Int32(int32(b.N))
		b.ResetTimer()
		st, err := client.CallServerStream[benchpb.BenchmarkMessage, benchpb.BenchmarkMessage](context.Background(), c, "Bench", "Feed", req)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for st.Receive() {
			n++
		}
		if st.Err() != nil || n != b.N {
			b.Fatalf("received %d of %d: %v", n, b.N, st.Err())
		}
		st.Close()
		reportStream(b)
	})
	b.Run("ServerStream/grpc", func(b *testing.B) {
		cc := grpcStreamConn(b)
		req := benchpb.New()
		req.Field2 = proto.Int32(int32(b.N))
		b.ResetTimer()
		st, err := cc.NewStream(context.Background(), &grpcStreamDesc.Streams[0], "/bench.Stream/Feed")
		if err != nil {
			b.Fatal(err)
		}
		if err := st.SendMsg(req); err != nil {
			b.Fatal(err)
		}
		st.CloseSend()
		n := 0
		for {
			m := new(benchpb.BenchmarkMessage)
			if err := st.RecvMsg(m); err == io.EOF {
				break
			} else if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != b.N {
			b.Fatalf("received %d of %d", n, b.N)
		}
		reportStream(b)
	})
	b.Run("BidiEcho/fleet", func(b *testing.B) {
		c := fleetStreamServer(b)
		b.ResetTimer()
		st, err := client.CallBidiStream[benchpb.BenchmarkMessage, benchpb.BenchmarkMessage](context.Background(), c, "Bench", "Echo")
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		errc := make(chan error, 1)
		go func() {
			msg := benchpb.New()
			for i := 0; i < b.N; i++ {
				if err := st.Send(msg); err != nil {
					errc <- err
					return
				}
			}
			errc <- st.CloseRequest()
		}()
		n := 0
		for {
			if _, err := st.Receive(); err == io.EOF {
				break
			} else if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if err := <-errc; err != nil || n != b.N {
			b.Fatalf("echoed %d of %d: %v", n, b.N, err)
		}
		reportStream(b)
	})
	b.Run("BidiEcho/grpc", func(b *testing.B) {
		cc := grpcStreamConn(b)
		b.ResetTimer()
		st, err := cc.NewStream(context.Background(), &grpcStreamDesc.Streams[1], "/bench.Stream/Echo")
		if err != nil {
			b.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() {
			msg := benchpb.New()
			for i := 0; i < b.N; i++ {
				if err := st.SendMsg(msg); err != nil {
					errc <- err
					return
				}
			}
			errc <- st.CloseSend()
		}()
		n := 0
		for {
			m := new(benchpb.BenchmarkMessage)
			if err := st.RecvMsg(m); err == io.EOF {
				break
			} else if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if err := <-errc; err != nil || n != b.N {
			b.Fatalf("echoed %d of %d: %v", n, b.N, err)
		}
		reportStream(b)
	})
}

// BenchmarkUnaryUnderStream: unary Hello.Say calls from 100 goroutines
// (RunParallel, parallelism 50 on 2 cores) on one connection, with the
// connection otherwise idle and while a server stream with a consumer as
// fast as it can saturates it. ns/op is the time per call across all
// callers; compare the two.
//
//	go test -run XXX -bench BenchmarkUnaryUnderStream -benchtime 20000x ./bench/
func BenchmarkUnaryUnderStream(b *testing.B) {
	for _, streaming := range []bool{false, true} {
		name := "idle"
		if streaming {
			name = "streaming"
		}
		b.Run(name, func(b *testing.B) {
			c := fleetStreamServer(b)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			if streaming {
				req := benchpb.New()
				req.Field2 = proto.Int32(1 << 30)
				st, err := client.CallServerStream[benchpb.BenchmarkMessage, benchpb.BenchmarkMessage](ctx, c, "Bench", "Feed", req)
				if err != nil {
					b.Fatal(err)
				}
				go func() {
					defer close(done)
					for st.Receive() {
					}
					st.Close()
				}()
			} else {
				close(done)
			}
			args := benchpb.New()
			b.SetParallelism(50)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				var reply benchpb.BenchmarkMessage
				for pb.Next() {
					reply.Reset()
					if err := c.Call(context.Background(), "Hello", "Say", args, &reply); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			cancel()
			<-done
		})
	}
}
