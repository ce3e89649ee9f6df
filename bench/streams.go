package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/fleetrpc/fleet/bench/peers"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/internal/benchpb"
	"github.com/fleetrpc/fleet/internal/demo"
	"github.com/fleetrpc/fleet/server"
)

// Scenario 6, streams: Fleet streams against grpc-go streams in the bench
// process, one connection over loopback, the 581-byte BenchmarkMessage
// (protobuf), measured with testing.Benchmark (benchtime as for codecs).
//
//   - server-stream: the server sends b.N messages on one stream, the
//     client receives them;
//   - bidi-echo: the client sends b.N messages from one goroutine and
//     receives the b.N echoes on another;
//   - unary-idle and unary-under-stream: Hello.Say from 100 goroutines on
//     one Fleet connection, alone and while a server stream with a
//     consumer as fast as it can saturates the same connection.

// StreamResult is one row of scenario 6.
type StreamResult struct {
	Peer       string  `json:"peer"`
	Test       string  `json:"test"`
	Messages   int     `json:"messages"`
	Seconds    float64 `json:"seconds"`
	MsgsPerSec float64 `json:"msgs_per_sec,omitempty"`
	MBPerSec   float64 `json:"mb_per_sec,omitempty"`  // message payload, 10^6 bytes
	CallNs     float64 `json:"ns_per_call,omitempty"` // unary tests: wall time per call across all callers
	Error      string  `json:"error,omitempty"`
}

// StreamCase is one stream benchmark: Bench is a Go benchmark function.
type StreamCase struct {
	Peer, Test string
	Unary      bool // Bench measures unary calls (ns per call), not messages
	Bench      func(b *testing.B)
}

// StreamCases lists the benchmarks of scenario 6; bench/stream_test.go
// runs the same ones as Go benchmarks.
func StreamCases() []StreamCase {
	return []StreamCase{
		{Peer: peers.Fleet, Test: "server-stream", Bench: fleetServerStream},
		{Peer: peers.GRPC, Test: "server-stream", Bench: grpcServerStream},
		{Peer: peers.Fleet, Test: "bidi-echo", Bench: fleetBidiEcho},
		{Peer: peers.GRPC, Test: "bidi-echo", Bench: grpcBidiEcho},
		{Peer: peers.Fleet, Test: "unary-idle", Unary: true, Bench: func(b *testing.B) { unaryUnderStream(b, false) }},
		{Peer: peers.Fleet, Test: "unary-under-stream", Unary: true, Bench: func(b *testing.B) { unaryUnderStream(b, true) }},
	}
}

func (r *runner) streams(ctx context.Context) error {
	setBenchtime(r.set)
	size := float64(proto.Size(benchpb.New()))
	for _, sc := range StreamCases() {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !r.measures(sc.Peer) {
			continue
		}
		r.prog.note(fmt.Sprintf("streams %s %s", sc.Peer, sc.Test))
		res := StreamResult{Peer: sc.Peer, Test: sc.Test}
		var failure string
		br := testing.Benchmark(func(b *testing.B) {
			sc.Bench(b)
			if b.Failed() {
				failure = "benchmark failed"
			}
		})
		if failure != "" || br.N == 0 {
			res.Error = "benchmark failed"
			r.rep.Streams = append(r.rep.Streams, res)
			continue
		}
		res.Messages, res.Seconds = br.N, br.T.Seconds()
		if sc.Unary {
			res.CallNs = nsPerOp(br)
		} else {
			res.MsgsPerSec = float64(br.N) / br.T.Seconds()
			res.MBPerSec = res.MsgsPerSec * size / 1e6
		}
		r.rep.Streams = append(r.rep.Streams, res)
	}
	return nil
}

// measures reports whether the run includes peer name.
func (r *runner) measures(name string) bool {
	for _, p := range r.peers {
		if p.Name == name {
			return true
		}
	}
	return false
}

func (r *runner) streamsTable() *table {
	t := &table{left: 2, head: []string{"test", "peer", "msgs/s", "MB/s", "ns per unary call", "Fleet ÷ this"}}
	fleet := map[string]float64{}
	for _, s := range r.rep.Streams {
		if s.Peer == peers.Fleet && s.Error == "" {
			fleet[s.Test] = s.MsgsPerSec
		}
	}
	for _, s := range r.rep.Streams {
		if s.Error != "" {
			t.add(s.Test, r.title(s.Peer), "—", "—", "—", "—")
			t.note("⚠ %s %s: %s", r.title(s.Peer), s.Test, s.Error)
			continue
		}
		if s.CallNs > 0 {
			t.add(s.Test, r.title(s.Peer), "—", "—", num(s.CallNs), "—")
			continue
		}
		ratio := "—"
		if f := fleet[s.Test]; f > 0 && s.MsgsPerSec > 0 {
			ratio = fmt.Sprintf("%.2f", f/s.MsgsPerSec)
		}
		t.add(s.Test, r.title(s.Peer), num(s.MsgsPerSec), fmt.Sprintf("%.1f", s.MBPerSec), "—", ratio)
	}
	t.note("testing.Benchmark in the bench process, benchtime %v, one connection over loopback, the 581-byte BenchmarkMessage (protobuf). server-stream: one stream of b.N messages; bidi-echo: b.N messages sent from one goroutine and echoed back to another; unary rows: Hello.Say from 100 goroutines on one Fleet connection, alone and while a server stream saturates it.", r.set.CodecTime)
	return t
}

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

func fleetServerStream(b *testing.B) {
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
}

func grpcServerStream(b *testing.B) {
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
}

func fleetBidiEcho(b *testing.B) {
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
}

func grpcBidiEcho(b *testing.B) {
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
}

// unaryUnderStream: Hello.Say from 100 goroutines (RunParallel,
// parallelism 50 on 2 cores) on one connection, idle or while a server
// stream saturates it.
func unaryUnderStream(b *testing.B, streaming bool) {
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
}
