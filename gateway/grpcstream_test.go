package gateway_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/gateway"
	"github.com/fleetrpc/fleet/internal/benchpb"
	"github.com/fleetrpc/fleet/internal/demo"
	"github.com/fleetrpc/fleet/server"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

type msg = benchpb.BenchmarkMessage

// Feed is a protobuf streaming service, registered with RegisterStreams.
// running counts handlers that have not returned; sent counts messages
// List sent.
type Feed struct{ running, sent *atomic.Int64 }

// List sends req.Field2 messages numbered 0.. in Field2 (Field9 "deadline"
// when the stream has one), then fails as field1 "fail:<code>" asks; with
// field1 "forever" it sends until the stream ends. Metadata "k" comes
// back as trailer "echo", as response metadata "head" (set before the
// first message: the stream's headers) and "late" (set after it: a
// trailer).
func (f Feed) List(ctx context.Context, req *msg, st *server.ServerStream[msg]) error {
	f.running.Add(1)
	defer f.running.Add(-1)
	if v := fleet.IncomingMetadata(ctx)["k"]; v != "" {
		st.ResponseTrailer()["echo"] = v
		fleet.SetResponseMetadata(ctx, "head", v)
	}
	out := proto.Clone(req).(*msg)
	if _, ok := ctx.Deadline(); ok {
		out.Field9 = proto.String("deadline")
	}
	for i := int32(0); req.GetField1() == "forever" || i < req.GetField2(); i++ {
		out.Field2 = proto.Int32(i)
		if err := st.Send(out); err != nil {
			return err
		}
		f.sent.Add(1)
	}
	if v := fleet.IncomingMetadata(ctx)["k"]; v != "" {
		fleet.SetResponseMetadata(ctx, "late", v)
	}
	if code, ok := failCode(req.GetField1()); ok {
		return fleet.NewError(code, "failed as asked")
	}
	return nil
}

// Sum receives messages and replies with the sum of their Field2 and
// their count in Field3.
func (f Feed) Sum(ctx context.Context, st *server.ClientStream[msg]) (*msg, error) {
	f.running.Add(1)
	defer f.running.Add(-1)
	var sum, n int32
	for st.Receive() {
		sum += st.Msg().GetField2()
		n++
	}
	if err := st.Err(); err != nil {
		return nil, err
	}
	out := benchpb.New()
	out.Field2, out.Field3 = proto.Int32(sum), proto.Int32(n)
	return out, nil
}

// Echo sends back each message it receives; a message with field1
// "fail:<code>" ends the stream with that code.
func (f Feed) Echo(ctx context.Context, st *server.BidiStream[msg, msg]) error {
	f.running.Add(1)
	defer f.running.Add(-1)
	for {
		in, err := st.Receive()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if code, ok := failCode(in.GetField1()); ok {
			return fleet.NewError(code, "failed as asked")
		}
		if err := st.Send(in); err != nil {
			return err
		}
	}
}

func failCode(s string) (fleet.Code, bool) {
	if len(s) < 5 || s[:5] != "fail:" {
		return 0, false
	}
	c, err := strconv.Atoi(s[5:])
	return fleet.Code(c), err == nil
}

// streamGateway serves a gateway for a server with Hello (unary), Feed
// (RegisterStreams), Gen.Upper (HandleBidiStream) and Plain.Words, a
// stream of Go strings; it returns the Feed counters and the address.
func streamGateway(t *testing.T, sopts ...server.Option) (Feed, string) {
	t.Helper()
	return streamGatewayWith(t, sopts)
}

// streamGatewayWith is streamGateway with gateway options.
func streamGatewayWith(t *testing.T, sopts []server.Option, gopts ...gateway.Option) (Feed, string) {
	t.Helper()
	srv := server.New(append([]server.Option{server.WithLogger(discard())}, sopts...)...)
	if err := srv.Register(&demo.Hello{}); err != nil {
		t.Fatal(err)
	}
	f := Feed{running: new(atomic.Int64), sent: new(atomic.Int64)}
	if err := srv.RegisterStreams("", f); err != nil {
		t.Fatal(err)
	}
	if err := server.HandleBidiStream(srv, "Gen", "Upper", func(ctx context.Context, st *server.BidiStream[msg, msg]) error {
		for {
			in, err := st.Receive()
			if err != nil {
				if err == io.EOF {
					return nil
				}
				return err
			}
			in.Field1 = proto.String("upper:" + in.GetField1())
			if err := st.Send(in); err != nil {
				return err
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := server.HandleServerStream(srv, "Plain", "Words", func(ctx context.Context, req *string, st *server.ServerStream[string]) error {
		return st.Send(req)
	}); err != nil {
		t.Fatal(err)
	}
	g := gateway.New(srv, append([]gateway.Option{gateway.WithLogger(discard()), gateway.WithProtoPackage("fleet.demo")}, gopts...)...)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- g.Serve(lis) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := g.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-done; !errors.Is(err, gateway.ErrClosed) {
			t.Errorf("Serve returned %v", err)
		}
	})
	return f, lis.Addr().String()
}

var (
	serverDesc = &grpc.StreamDesc{ServerStreams: true}
	clientDesc = &grpc.StreamDesc{ClientStreams: true}
	bidiDesc   = &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}
)

// waitFor polls cond every few milliseconds for up to 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// openList opens a server stream at path with req and half-closes. A
// stream the server already ended (refused) makes SendMsg return io.EOF;
// its status is then RecvMsg's error.
func openList(t *testing.T, ctx context.Context, cc *grpc.ClientConn, path string, req *msg) grpc.ClientStream {
	t.Helper()
	cs, err := cc.NewStream(ctx, serverDesc, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.SendMsg(req); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	if err := cs.CloseSend(); err != nil {
		t.Fatal(err)
	}
	return cs
}

func TestGRPCServerStream(t *testing.T) {
	f, addr := streamGateway(t)
	cc := grpcConn(t, addr)

	for _, path := range []string{"/Feed/List", "/fleet.demo.Feed/List"} {
		req := benchpb.New()
		req.Field2 = proto.Int32(50)
		ctx := metadata.AppendToOutgoingContext(context.Background(), "k", "v1")
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		cs := openList(t, ctx, cc, path, req)
		hdr, err := cs.Header()
		if err != nil {
			t.Fatalf("%s: header: %v", path, err)
		}
		if got := hdr.Get("head"); len(got) != 1 || got[0] != "v1" {
			t.Fatalf("%s: header %v", path, hdr)
		}
		for i := range int32(50) {
			out := new(msg)
			if err := cs.RecvMsg(out); err != nil {
				t.Fatalf("%s: message %d: %v", path, i, err)
			}
			if out.GetField2() != i || out.GetField9() != "deadline" || out.GetField3() != req.GetField3() {
				t.Fatalf("%s: message %d: %v", path, i, out)
			}
		}
		if err := cs.RecvMsg(new(msg)); err != io.EOF {
			t.Fatalf("%s: end: %v", path, err)
		}
		tr := cs.Trailer()
		if got := tr.Get("echo"); len(got) != 1 || got[0] != "v1" || len(tr.Get("head")) != 0 || len(tr.Get("late")) != 1 {
			t.Fatalf("%s: trailer %v", path, tr)
		}
		cancel()
	}

	t.Run("error mid-stream", func(t *testing.T) {
		req := benchpb.New()
		req.Field1, req.Field2 = proto.String("fail:9"), proto.Int32(3)
		cs := openList(t, context.Background(), cc, "/Feed/List", req)
		n := 0
		var err error
		for err = cs.RecvMsg(new(msg)); err == nil; err = cs.RecvMsg(new(msg)) {
			n++
		}
		if st, _ := status.FromError(err); n != 3 || st.Code() != codes.FailedPrecondition || st.Message() != "failed as asked" {
			t.Fatalf("after %d messages: %v", n, err)
		}
	})
	t.Run("headers of a stream without messages", func(t *testing.T) {
		req := benchpb.New()
		req.Field1, req.Field2 = proto.String("fail:9"), proto.Int32(0)
		ctx := metadata.AppendToOutgoingContext(context.Background(), "k", "v2")
		cs := openList(t, ctx, cc, "/Feed/List", req)
		if err := cs.RecvMsg(new(msg)); status.Code(err) != codes.FailedPrecondition {
			t.Fatalf("got %v", err)
		}
		hdr, _ := cs.Header()
		// No message went out: the headers carry "late" too.
		if got := hdr.Get("head"); len(got) != 1 || got[0] != "v2" || len(hdr.Get("late")) != 1 {
			t.Fatalf("header %v", hdr)
		}
		if got := cs.Trailer().Get("echo"); len(got) != 1 || got[0] != "v2" {
			t.Fatalf("trailer %v", cs.Trailer())
		}
	})
	t.Run("cancel", func(t *testing.T) {
		req := benchpb.New()
		req.Field1 = proto.String("forever")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		cs := openList(t, ctx, cc, "/Feed/List", req)
		for range 3 {
			if err := cs.RecvMsg(new(msg)); err != nil {
				t.Fatal(err)
			}
		}
		cancel()
		if err := cs.RecvMsg(new(msg)); status.Code(err) != codes.Canceled {
			// Messages already received may come first.
			for err == nil {
				err = cs.RecvMsg(new(msg))
			}
			if status.Code(err) != codes.Canceled {
				t.Fatalf("after cancel: %v", err)
			}
		}
		waitFor(t, "the handler to end", func() bool { return f.running.Load() == 0 })
	})
	t.Run("no request", func(t *testing.T) {
		cs, err := cc.NewStream(context.Background(), serverDesc, "/Feed/List")
		if err != nil {
			t.Fatal(err)
		}
		if err := cs.CloseSend(); err != nil {
			t.Fatal(err)
		}
		if err := cs.RecvMsg(new(msg)); status.Code(err) != codes.Unimplemented {
			t.Fatalf("server stream without a request: %v", err)
		}
	})
}

func TestGRPCClientStream(t *testing.T) {
	f, addr := streamGateway(t)
	cc := grpcConn(t, addr)
	cs, err := cc.NewStream(context.Background(), clientDesc, "/fleet.demo.Feed/Sum")
	if err != nil {
		t.Fatal(err)
	}
	var want int32
	for i := range int32(100) {
		m := benchpb.New()
		m.Field2 = proto.Int32(i)
		want += i
		if err := cs.SendMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := cs.CloseSend(); err != nil {
		t.Fatal(err)
	}
	out := new(msg)
	if err := cs.RecvMsg(out); err != nil {
		t.Fatal(err)
	}
	if out.GetField2() != want || out.GetField3() != 100 {
		t.Fatalf("sum %d of %d messages, want %d of 100", out.GetField2(), out.GetField3(), want)
	}
	if err := cs.RecvMsg(new(msg)); err != io.EOF {
		t.Fatalf("end: %v", err)
	}

	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		cs, err := cc.NewStream(ctx, clientDesc, "/Feed/Sum")
		if err != nil {
			t.Fatal(err)
		}
		if err := cs.SendMsg(benchpb.New()); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the handler to start", func() bool { return f.running.Load() == 1 })
		cancel()
		waitFor(t, "the handler to end", func() bool { return f.running.Load() == 0 })
	})
}

func TestGRPCBidiStream(t *testing.T) {
	f, addr := streamGateway(t)
	cc := grpcConn(t, addr)
	for _, tc := range []struct{ path, prefix string }{{"/Feed/Echo", ""}, {"/fleet.demo.Gen/Upper", "upper:"}} {
		cs, err := cc.NewStream(context.Background(), bidiDesc, tc.path)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			m := benchpb.New()
			m.Field1 = proto.String(strconv.Itoa(i))
			if err := cs.SendMsg(m); err != nil {
				t.Fatal(err)
			}
			out := new(msg)
			if err := cs.RecvMsg(out); err != nil {
				t.Fatalf("%s: %d: %v", tc.path, i, err)
			}
			if out.GetField1() != tc.prefix+strconv.Itoa(i) || out.GetField3() != m.GetField3() {
				t.Fatalf("%s: %d: %v", tc.path, i, out)
			}
		}
		if err := cs.CloseSend(); err != nil {
			t.Fatal(err)
		}
		if err := cs.RecvMsg(new(msg)); err != io.EOF {
			t.Fatalf("%s: end: %v", tc.path, err)
		}
	}

	t.Run("error mid-stream", func(t *testing.T) {
		cs, err := cc.NewStream(context.Background(), bidiDesc, "/Feed/Echo")
		if err != nil {
			t.Fatal(err)
		}
		if err := cs.SendMsg(benchpb.New()); err != nil {
			t.Fatal(err)
		}
		if err := cs.RecvMsg(new(msg)); err != nil {
			t.Fatal(err)
		}
		m := benchpb.New()
		m.Field1 = proto.String("fail:8")
		if err := cs.SendMsg(m); err != nil {
			t.Fatal(err)
		}
		err = cs.RecvMsg(new(msg))
		if st, _ := status.FromError(err); st.Code() != codes.ResourceExhausted || st.Message() != "failed as asked" {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		cs, err := cc.NewStream(ctx, bidiDesc, "/Feed/Echo")
		if err != nil {
			t.Fatal(err)
		}
		if err := cs.SendMsg(benchpb.New()); err != nil {
			t.Fatal(err)
		}
		if err := cs.RecvMsg(new(msg)); err != nil {
			t.Fatal(err)
		}
		// The handler now waits in Receive.
		cancel()
		waitFor(t, "the handler to end", func() bool { return f.running.Load() == 0 })
	})
	t.Run("deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		cs, err := cc.NewStream(ctx, bidiDesc, "/Feed/Echo")
		if status.Code(err) == codes.DeadlineExceeded {
			return // a very slow machine: the deadline passed before the stream opened
		}
		if err != nil {
			t.Fatal(err)
		}
		// Never sends: the handler waits in Receive until the deadline.
		if err := cs.RecvMsg(new(msg)); status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("got %v", err)
		}
		waitFor(t, "the handler to end", func() bool { return f.running.Load() == 0 })
	})
}

// TestGRPCStreamSlowReader streams far more than the flow-control windows
// hold to a gRPC client that stops reading: the handler is held back, a
// unary call on the same connection still completes, and once the client
// reads again every message arrives.
func TestGRPCStreamSlowReader(t *testing.T) {
	t.Run("grpc-go transport", func(t *testing.T) {
		f, addr := streamGateway(t)
		testSlowReader(t, f, addr)
	})
	t.Run("net/http ServeHTTP", func(t *testing.T) {
		f, addr := streamGatewayWith(t, nil, gateway.WithH2CToHTTP(true))
		testSlowReader(t, f, addr)
	})
}

func testSlowReader(t *testing.T, f Feed, addr string) {
	// A fixed window turns off grpc-go's BDP estimation, which could grow
	// the window to 16 MiB.
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	const n = 300
	req := benchpb.New()
	req.Field1 = proto.String(string(make([]byte, 16<<10)))
	req.Field2 = proto.Int32(n)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs := openList(t, ctx, cc, "/Feed/List", req)
	if err := cs.RecvMsg(new(msg)); err != nil {
		t.Fatal(err)
	}
	// The client reads nothing more: the handler stops short of the end,
	// held by the windows (300 × 16 KiB = 4.7 MiB is far more than the
	// client's 64 KiB window and grpc-go's 64 KiB write quota hold).
	waitFor(t, "the handler to send", func() bool { return f.sent.Load() > 1 })
	in, out := benchpb.New(), new(msg)
	if err := cc.Invoke(ctx, "/Hello/Say", in, out); err != nil {
		t.Fatalf("unary call beside a stalled stream: %v", err)
	}
	if got := f.sent.Load(); got >= n {
		t.Fatalf("the handler sent all %d messages to a client that read one", got)
	}
	for i := int32(1); i < n; i++ {
		out := new(msg)
		if err := cs.RecvMsg(out); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if out.GetField2() != i {
			t.Fatalf("message %d numbered %d", i, out.GetField2())
		}
	}
	if err := cs.RecvMsg(new(msg)); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
}

// TestGRPCStreamServeHTTP runs each stream kind through
// grpc.Server.ServeHTTP behind net/http (WithH2CToHTTP; the same path as
// gRPC over TLS and Gateway.Handler).
func TestGRPCStreamServeHTTP(t *testing.T) {
	f, addr := streamGatewayWith(t, nil, gateway.WithH2CToHTTP(true))
	cc := grpcConn(t, addr)
	req := benchpb.New()
	req.Field2 = proto.Int32(5)
	cs := openList(t, context.Background(), cc, "/Feed/List", req)
	n := 0
	var err error
	for err = cs.RecvMsg(new(msg)); err == nil; err = cs.RecvMsg(new(msg)) {
		n++
	}
	if err != io.EOF || n != 5 {
		t.Fatalf("List: %d messages, %v", n, err)
	}

	cs, err = cc.NewStream(context.Background(), clientDesc, "/Feed/Sum")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := cs.SendMsg(benchpb.New()); err != nil {
			t.Fatal(err)
		}
	}
	out := new(msg)
	if err := cs.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if err := cs.RecvMsg(out); err != nil || out.GetField3() != 3 {
		t.Fatalf("Sum: %v %v", out, err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs, err = cc.NewStream(ctx, bidiDesc, "/Feed/Echo")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		m := benchpb.New()
		m.Field1 = proto.String(strconv.Itoa(i))
		if err := cs.SendMsg(m); err != nil {
			t.Fatal(err)
		}
		if err := cs.RecvMsg(out); err != nil || out.GetField1() != strconv.Itoa(i) {
			t.Fatalf("Echo %d: %v %v", i, out, err)
		}
	}
	cancel()
	waitFor(t, "the handlers to end", func() bool { return f.running.Load() == 0 })
}

func TestGRPCStreamAuthInterceptorLimits(t *testing.T) {
	var seen atomic.Int64
	_, addr := streamGateway(t,
		server.WithAuth(func(ctx context.Context, info *fleet.CallInfo, token string) error {
			if token != "Bearer secret" {
				return errors.New("who are you")
			}
			return nil
		}),
		server.WithInterceptor(server.StreamInterceptorFunc(func(next server.StreamFunc) server.StreamFunc {
			return func(ctx context.Context, info *fleet.CallInfo, st server.Stream) error {
				seen.Add(1)
				if info.Route != fleet.RouteGRPC {
					return fleet.Errorf(fleet.Internal, "route %q, want grpc", info.Route)
				}
				if info.Metadata()["refuse"] != "" {
					return fleet.NewError(fleet.PermissionDenied, "refused by interceptor")
				}
				return next(ctx, info, st)
			}
		})),
		server.WithMaxStreamMessage(1000),
	)
	cc := grpcConn(t, addr)
	req := benchpb.New()
	req.Field2 = proto.Int32(1)
	recvErr := func(ctx context.Context, req *msg) error {
		cs := openList(t, ctx, cc, "/Feed/List", req)
		var err error
		for err == nil {
			err = cs.RecvMsg(new(msg))
		}
		return err
	}
	if err := recvErr(context.Background(), req); status.Code(err) != codes.Unauthenticated || status.Convert(err).Message() != "who are you" {
		t.Fatalf("without token: %v", err)
	}
	if seen.Load() != 0 {
		t.Fatal("interceptor ran for a stream that failed auth")
	}
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer secret")
	if err := recvErr(ctx, req); err != io.EOF {
		t.Fatalf("with token: %v", err)
	}
	if seen.Load() != 1 {
		t.Fatalf("interceptor ran %d times", seen.Load())
	}
	if err := recvErr(metadata.AppendToOutgoingContext(ctx, "refuse", "1"), req); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("refused: %v", err)
	}
	big := benchpb.New()
	big.Field1 = proto.String(string(make([]byte, 2000)))
	if err := recvErr(ctx, big); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("message over WithMaxStreamMessage: %v", err)
	}
}

func TestGRPCStreamNotProtobuf(t *testing.T) {
	_, addr := streamGateway(t)
	cc := grpcConn(t, addr)
	// A service with streaming methods only is known to the health service.
	for _, name := range []string{"fleet.demo.Feed", "Feed"} {
		res, err := healthpb.NewHealthClient(cc).Check(context.Background(), &healthpb.HealthCheckRequest{Service: name})
		if err != nil || res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health of %s: %v %v", name, res, err)
		}
	}
	cs := openList(t, context.Background(), cc, "/Plain/Words", benchpb.New())
	if err := cs.RecvMsg(new(msg)); status.Code(err) != codes.Unimplemented {
		t.Fatalf("stream of Go strings: %v", err)
	}
	cs = openList(t, context.Background(), cc, "/Feed/Nope", benchpb.New())
	if err := cs.RecvMsg(new(msg)); status.Code(err) != codes.Unimplemented {
		t.Fatalf("unknown stream method: %v", err)
	}
}

// TestGRPCBidiReceiverOutlivesHandler: a bidi handler that leaves a
// goroutine blocked in Receive and returns. The goroutine's Receive ends
// with the gRPC call (natively it ends with the stream), on both gRPC
// paths, with no race.
func TestGRPCBidiReceiverOutlivesHandler(t *testing.T) {
	for _, h2c := range []bool{false, true} {
		srv := server.New(server.WithLogger(discard()))
		var ended atomic.Int64
		if err := server.HandleBidiStream(srv, "Detach", "Run", func(ctx context.Context, st *server.BidiStream[msg, msg]) error {
			go func() {
				for {
					if _, err := st.Receive(); err != nil {
						ended.Add(1)
						return
					}
				}
			}()
			return st.Send(benchpb.New())
		}); err != nil {
			t.Fatal(err)
		}
		g := gateway.New(srv, gateway.WithLogger(discard()), gateway.WithH2CToHTTP(h2c))
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- g.Serve(lis) }()
		cc := grpcConn(t, lis.Addr().String())
		const n = 20
		for range n {
			cs, err := cc.NewStream(context.Background(), bidiDesc, "/Detach/Run")
			if err != nil {
				t.Fatal(err)
			}
			if err := cs.RecvMsg(new(msg)); err != nil {
				t.Fatal(err)
			}
			if err := cs.RecvMsg(new(msg)); err != io.EOF {
				t.Fatalf("end: %v", err)
			}
		}
		waitFor(t, "the receivers to end", func() bool { return ended.Load() == n })
		cc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		if err := g.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		cancel()
		if err := <-done; !errors.Is(err, gateway.ErrClosed) {
			t.Errorf("Serve returned %v", err)
		}
	}
}
