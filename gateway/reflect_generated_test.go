package gateway_test

import (
	"context"
	"testing"
	"time"

	"github.com/fleetrpc/fleet/gateway"
	"github.com/fleetrpc/fleet/internal/benchpb"
	"github.com/fleetrpc/fleet/server"
	reflectv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
)

// TestReflectGeneratedService: a service registered under the full name
// of a .proto service whose Go code is linked in (benchmark.proto's
// pb.Hello, as protoc-gen-fleet registers generated services) with the
// same methods and messages is listed under that name, and reflection
// answers with the .proto file protoc-gen-go registered, not a
// synthesized one; the method answers under /pb.Hello/Say.
func TestReflectGeneratedService(t *testing.T) {
	srv := server.New(server.WithLogger(discard()))
	err := server.HandleUnary(srv, "pb.Hello", "Say", func(ctx context.Context, in *benchpb.BenchmarkMessage) (*benchpb.BenchmarkMessage, error) {
		out := new(benchpb.BenchmarkMessage)
		benchpb.Echo(out, in)
		return out, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cc := grpcConn(t, serveGateway(t, gateway.New(srv, gateway.WithLogger(discard()))))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

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
	listed := false
	for _, s := range resp.GetListServicesResponse().GetService() {
		listed = listed || s.GetName() == "pb.Hello"
	}
	if !listed {
		t.Fatalf("pb.Hello not listed: %v", resp)
	}
	resp = ask(&reflectv1.ServerReflectionRequest{MessageRequest: &reflectv1.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "pb.Hello"}})
	fds := resp.GetFileDescriptorResponse().GetFileDescriptorProto()
	if len(fds) == 0 {
		t.Fatalf("no file for pb.Hello: %v", resp)
	}
	var got descriptorpb.FileDescriptorProto
	if err := proto.Unmarshal(fds[0], &got); err != nil {
		t.Fatal(err)
	}
	want := benchpb.File_benchmark_proto.Path()
	if got.GetName() != want || got.GetPackage() != "pb" || len(got.GetService()) != 1 || got.GetService()[0].GetName() != "Hello" {
		t.Fatalf("reflection answered with file %q (package %q), want the registered %q", got.GetName(), got.GetPackage(), want)
	}

	out := new(benchpb.BenchmarkMessage)
	if err := cc.Invoke(ctx, "/pb.Hello/Say", benchpb.New(), out); err != nil || out.GetField1() != "OK" {
		t.Fatalf("/pb.Hello/Say: %v %v", err, out.GetField1())
	}
}
