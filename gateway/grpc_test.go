package gateway_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
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
	reflectv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func grpcConn(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

func TestGRPC(t *testing.T) {
	_, addr := start(t, nil, gateway.WithProtoPackage("fleet.demo"))
	cc := grpcConn(t, addr)
	ctx := context.Background()

	for _, path := range []string{"/Hello/Say", "/fleet.demo.Hello/Say"} {
		in, out := benchpb.New(), new(benchpb.BenchmarkMessage)
		if err := cc.Invoke(ctx, path, in, out); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if err := demo.CheckReply(in, out); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}

	t.Run("codes", func(t *testing.T) {
		for c := fleet.Canceled; c <= fleet.ShuttingDown; c++ {
			in := benchpb.New()
			in.Field1 = proto.String("fail:" + strconv.Itoa(int(c)))
			err := cc.Invoke(ctx, "/Probe/Say", in, new(benchpb.BenchmarkMessage))
			st, _ := status.FromError(err)
			if st.Code() != gateway.GRPCCode(c) || st.Message() != "failed as asked" {
				t.Fatalf("fleet code %v: got %v %q", c, st.Code(), st.Message())
			}
		}
		if gateway.GRPCCode(fleet.ShuttingDown) != codes.Unavailable || gateway.GRPCCode(fleet.NotFound) != codes.NotFound {
			t.Fatal("code mapping")
		}
	})
	t.Run("unknown", func(t *testing.T) {
		for _, path := range []string{"/Nope/Say", "/Hello/Nope", "/Arith/Nope"} {
			err := cc.Invoke(ctx, path, benchpb.New(), new(benchpb.BenchmarkMessage))
			if status.Code(err) != codes.Unimplemented {
				t.Fatalf("%s: %v", path, err)
			}
		}
	})
	t.Run("metadata and deadline", func(t *testing.T) {
		mctx := metadata.AppendToOutgoingContext(ctx, "k", "v1")
		mctx, cancel := context.WithTimeout(mctx, time.Minute)
		defer cancel()
		var hdr, tr metadata.MD
		out := new(benchpb.BenchmarkMessage)
		if err := cc.Invoke(mctx, "/Probe/Say", benchpb.New(), out, grpc.Header(&hdr), grpc.Trailer(&tr)); err != nil {
			t.Fatal(err)
		}
		if got := hdr.Get("echo"); len(got) != 1 || got[0] != "v1" || len(hdr.Get("echo-trailer")) != 0 {
			t.Fatalf("header %v", hdr)
		}
		if got := tr.Get("echo-trailer"); len(got) != 1 || got[0] != "v1" || len(tr.Get("echo")) != 0 {
			t.Fatalf("trailer %v", tr)
		}
		if out.GetField1() != "deadline" {
			t.Fatalf("handler saw no deadline: %q", out.GetField1())
		}
	})
	t.Run("deadline exceeded", func(t *testing.T) {
		dctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		in := benchpb.New()
		in.Field1 = proto.String("wait")
		if err := cc.Invoke(dctx, "/Probe/Say", in, new(benchpb.BenchmarkMessage)); status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("%v", err)
		}
	})
	t.Run("bad message", func(t *testing.T) {
		// A message missing proto2 required fields does not decode.
		err := cc.Invoke(ctx, "/Hello/Say", wrapperspb.String("x"), new(benchpb.BenchmarkMessage))
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("%v", err)
		}
	})
}

func TestGRPCAuth(t *testing.T) {
	auth := server.WithAuth(func(ctx context.Context, info *fleet.CallInfo, token string) error {
		if token != "Bearer secret" {
			return errors.New("who are you")
		}
		return nil
	})
	_, addr := start(t, []server.Option{auth})
	cc := grpcConn(t, addr)
	err := cc.Invoke(context.Background(), "/Hello/Say", benchpb.New(), new(benchpb.BenchmarkMessage))
	if st, _ := status.FromError(err); st.Code() != codes.Unauthenticated || st.Message() != "who are you" {
		t.Fatalf("without token: %v", err)
	}
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer secret")
	if err := cc.Invoke(ctx, "/Hello/Say", benchpb.New(), new(benchpb.BenchmarkMessage)); err != nil {
		t.Fatalf("with token: %v", err)
	}
}

// TestHandlerMount mounts Handler on a user's own HTTP server with h2c
// and calls it with grpc-go and net/http.
func TestHandlerMount(t *testing.T) {
	srv := server.New(server.WithLogger(discard()))
	if err := srv.Register(&demo.Hello{}); err != nil {
		t.Fatal(err)
	}
	if err := srv.Register(demo.Arith{}); err != nil {
		t.Fatal(err)
	}
	g := gateway.New(srv)
	mux := http.NewServeMux()
	mux.Handle("/", g.Handler())
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetUnencryptedHTTP2(true)
	hs := &http.Server{Handler: mux, Protocols: &protos}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = hs.Serve(lis) }()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
		<-done
		_ = g.Shutdown(ctx)
	}()
	addr := lis.Addr().String()

	cc := grpcConn(t, addr)
	in, out := benchpb.New(), new(benchpb.BenchmarkMessage)
	if err := cc.Invoke(context.Background(), "/Hello/Say", in, out); err != nil || demo.CheckReply(in, out) != nil {
		t.Fatalf("gRPC through the mounted handler: %v", err)
	}
	hc := httpClient(t)
	resp, b := post(t, hc, "http://"+addr+"/Arith/Add", `{"A":20,"B":22}`, nil)
	if resp.StatusCode != 200 || string(b) != "42" {
		t.Fatalf("HTTP/JSON: %d %s", resp.StatusCode, b)
	}
	resp, b = post(t, hc, "http://"+addr+"/jsonrpc", `{"jsonrpc":"2.0","method":"Arith.Add","params":{"A":1,"B":1},"id":1}`, nil)
	if resp.StatusCode != 200 || string(b) != `{"jsonrpc":"2.0","result":2,"id":1}` {
		t.Fatalf("JSON-RPC: %d %s", resp.StatusCode, b)
	}
}

func TestGRPCReflectionAndHealth(t *testing.T) {
	_, addr := start(t, nil, gateway.WithProtoPackage("fleet.demo"))
	cc := grpcConn(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	hc := healthpb.NewHealthClient(cc)
	for _, svc := range []string{"", "Hello", "fleet.demo.Hello"} {
		r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health %q: %v %v", svc, r, err)
		}
	}
	if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "Nope"}); status.Code(err) != codes.NotFound {
		t.Fatalf("health of unknown service: %v", err)
	}

	stream, err := reflectv1.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.CloseSend()
	ask := func(req *reflectv1.ServerReflectionRequest) *reflectv1.ServerReflectionResponse {
		t.Helper()
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := ask(&reflectv1.ServerReflectionRequest{MessageRequest: &reflectv1.ServerReflectionRequest_ListServices{}})
	names := map[string]bool{}
	for _, s := range resp.GetListServicesResponse().GetService() {
		names[s.GetName()] = true
	}
	for _, want := range []string{"fleet.demo.Hello", "fleet.demo.Probe", "fleet.demo.Arith", "fleet.demo.Plain", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"} {
		if !names[want] {
			t.Fatalf("services %v lack %s", names, want)
		}
	}
	resp = ask(&reflectv1.ServerReflectionRequest{MessageRequest: &reflectv1.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "fleet.demo.Hello"}})
	fds := resp.GetFileDescriptorResponse().GetFileDescriptorProto()
	if len(fds) == 0 {
		t.Fatalf("no file for fleet.demo.Hello: %v", resp)
	}
	var fd descriptorpb.FileDescriptorProto
	if err := proto.Unmarshal(fds[0], &fd); err != nil {
		t.Fatal(err)
	}
	if len(fd.GetService()) != 1 || fd.GetService()[0].GetName() != "Hello" || fd.GetService()[0].GetMethod()[0].GetName() != "Say" {
		t.Fatalf("file %v", &fd)
	}
}

// TestGRPCHealthFollowsServer: grpc.health.v1 reports the statuses set
// with server.SetServingStatus.
func TestGRPCHealthFollowsServer(t *testing.T) {
	srv := server.New(server.WithLogger(discard()))
	if err := srv.Register(&demo.Hello{}); err != nil {
		t.Fatal(err)
	}
	g := gateway.New(srv, gateway.WithProtoPackage("fleet.demo"))
	cc := grpcConn(t, serveGateway(t, g))
	hc := healthpb.NewHealthClient(cc)
	ctx := context.Background()
	check := func(svc string) healthpb.HealthCheckResponse_ServingStatus {
		t.Helper()
		r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil {
			t.Fatalf("Check(%q): %v", svc, err)
		}
		return r.GetStatus()
	}
	srv.SetServingStatus("Hello", server.StatusNotServing)
	if st := check("fleet.demo.Hello"); st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("Hello after SetServingStatus(NOT_SERVING): %v", st)
	}
	if st := check(""); st != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("server: %v", st)
	}
	srv.SetServingStatus("Hello", server.StatusServing)
	if st := check("Hello"); st != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Hello after SetServingStatus(SERVING): %v", st)
	}
}
