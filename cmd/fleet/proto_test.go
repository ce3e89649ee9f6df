package main

import (
	"context"
	"encoding/json"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	reflectv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/gateway"
	"github.com/fleetrpc/fleet/internal/benchpb"
	"github.com/fleetrpc/fleet/internal/demo"
	"github.com/fleetrpc/fleet/internal/testutil"
	"github.com/fleetrpc/fleet/server"
	"github.com/fleetrpc/fleet/server/reflection"
)

// startGatewayServer serves the demo's Arith and Hello with health and
// reflection (registered as fleet demo's servers are) behind the gateway,
// on a loopback port that answers Fleet, gRPC and HTTP/JSON.
func startGatewayServer(t *testing.T, gopts ...gateway.Option) string {
	t.Helper()
	srv := server.New(server.WithLogger(quietLogger()))
	if err := registerBuiltins(srv, false); err != nil {
		t.Fatal(err)
	}
	for _, r := range []any{demo.Arith{}, &demo.Hello{}} {
		if err := srv.Register(r); err != nil {
			t.Fatal(err)
		}
	}
	gw := gateway.New(srv, append([]gateway.Option{gateway.WithLogger(quietLogger())}, gopts...)...)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = gw.Serve(lis) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	})
	return lis.Addr().String()
}

// needTool returns the path of a tool that .ci/services.sh installs.
func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found (.ci/setup.d/65-cli.sh installs it): %v", name, err)
	}
	return p
}

// nodeModules fails the test unless testdata/node holds its packages.
func nodeModules(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("testdata", "node"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules")); err != nil {
		t.Fatalf("%s/node_modules missing (.ci/setup.d/65-cli.sh runs npm ci there): %v", dir, err)
	}
	return dir
}

// TestDescribeProto writes the .proto of the demo's Arith (Go types) and
// Hello (protobuf) with fleet describe --proto --out, compiles both with
// protoc, and calls both services through the gateway with a Node gRPC
// client (@grpc/grpc-js) loaded from those files alone.
func TestDescribeProto(t *testing.T) {
	protoc := needTool(t, "protoc")
	node := needTool(t, "node")
	nodeDir := nodeModules(t)
	addr := startGatewayServer(t)
	dir := t.TempDir()
	for _, svc := range []string{"Arith", "Hello"} {
		out, errs, status := run(t, "", newDescribeCmd, "--proto", "--out", dir, addr, svc)
		want := filepath.Join(dir, "fleet", "gateway", svc+".proto")
		if status != 0 || !strings.HasPrefix(out, want+"\n") {
			t.Fatalf("describe --proto %s: status %d, stderr %q, stdout %q", svc, status, errs, out)
		}
		cmd := exec.Command(protoc, "-I", dir, "--include_imports", "-o", filepath.Join(t.TempDir(), "set.pb"), filepath.Join("fleet", "gateway", svc+".proto"))
		cmd.Dir = dir
		if b, err := cmd.CombinedOutput(); err != nil {
			src, _ := os.ReadFile(want)
			t.Fatalf("protoc %s: %v\n%s\n%s", svc, err, b, src)
		}
	}
	// Without --out: the service's file on stdout, its imports named on
	// stderr.
	out, errs, status := run(t, "", newDescribeCmd, "--proto", addr, "Hello")
	if status != 0 || !strings.Contains(out, "service Hello {") || !strings.Contains(out, `import "benchmark.proto";`) ||
		!strings.Contains(out, "rpc Say ( pb.BenchmarkMessage ) returns ( pb.BenchmarkMessage );") || !strings.Contains(errs, "benchmark.proto") {
		t.Fatalf("describe --proto Hello: status %d, stderr %q\n%s", status, errs, out)
	}

	cmd := exec.Command(node, filepath.Join(nodeDir, "grpcclient.js"), addr, dir)
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node client: %v\n%s", err, b)
	}
	for _, want := range []string{"ok Arith.Add 42", "ok Arith.Mul 42", "ok Hello.Say"} {
		if !strings.Contains(string(b), want+"\n") {
			t.Fatalf("node client output lacks %q:\n%s", want, b)
		}
	}
}

// TestDescribeProtoWithoutGoTypes: a server whose reflection does not map
// Go types (reflection.Register, no Config) gives no .proto for a
// Go-typed service, and says why; its protobuf service still gets one.
func TestDescribeProtoWithoutGoTypes(t *testing.T) {
	srv := server.New(server.WithLogger(quietLogger()))
	if err := reflection.Register(srv); err != nil {
		t.Fatal(err)
	}
	for _, r := range []any{demo.Arith{}, &demo.Hello{}} {
		if err := srv.Register(r); err != nil {
			t.Fatal(err)
		}
	}
	addr := testutil.Serve(t, srv)
	_, errs, status := run(t, "", newDescribeCmd, "--proto", addr, "Arith")
	if status != exitCodeShift+int(fleet.FailedPrecondition) || !strings.Contains(errs, "reflection.Config.GoTypes") {
		t.Fatalf("Arith: status %d, stderr %q", status, errs)
	}
	out, errs, status := run(t, "", newDescribeCmd, "--proto", addr, "Hello")
	if status != 0 || !strings.Contains(out, "service Hello {") {
		t.Fatalf("Hello: status %d, stderr %q, stdout %q", status, errs, out)
	}
	_, errs, status = run(t, "", newDescribeCmd, "--proto", addr, "Helo")
	if status != exitCodeShift+int(fleet.NotFound) || !strings.Contains(errs, "Hello") {
		t.Fatalf("Helo: status %d, stderr %q", status, errs)
	}
}

// TestDescribeOpenAPI writes the OpenAPI document of the demo's services
// with fleet describe --openapi, has @apidevtools/swagger-parser validate
// it, and calls every documented path once against the gateway, checking
// that the status is documented and the body fits the documented schema
// (testdata/node/openapi.js).
func TestDescribeOpenAPI(t *testing.T) {
	node := needTool(t, "node")
	nodeDir := nodeModules(t)
	addr := startGatewayServer(t)
	out, errs, status := run(t, "", newDescribeCmd, "--openapi", addr)
	if status != 0 {
		t.Fatalf("describe --openapi: status %d, stderr %q", status, errs)
	}
	var doc struct {
		OpenAPI string                    `json:"openapi"`
		Paths   map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || doc.OpenAPI != "3.1.0" {
		t.Fatalf("document: %v\n%s", err, out)
	}
	want := []string{"/Arith/Add", "/Arith/Div", "/Arith/Mul", "/Hello/Say", "/fleet.Reflection/Describe", "/fleet.Reflection/List"}
	for _, p := range want {
		if doc.Paths[p]["post"] == nil {
			t.Errorf("document lacks POST %s", p)
		}
	}
	file := filepath.Join(t.TempDir(), "openapi.json")
	if err := os.WriteFile(file, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := exec.Command(node, filepath.Join(nodeDir, "openapi.js"), file).CombinedOutput()
	if err != nil {
		t.Fatalf("openapi.js: %v\n%s", err, b)
	}
	lines := string(b)
	if !strings.HasPrefix(lines, "valid\n") {
		t.Fatalf("openapi.js:\n%s", lines)
	}
	for _, p := range want {
		if !strings.Contains(lines, "ok POST "+p+" ") {
			t.Errorf("openapi.js did not call %s:\n%s", p, lines)
		}
	}
	// The example bodies are zero values: Arith.Div divides by zero and
	// answers the documented error; the others answer 200; a text/plain
	// body the documented 415.
	for _, w := range []string{"ok POST /Arith/Add 200", "ok POST /Arith/Div 500", "ok POST /Hello/Say 200", "ok POST /fleet.Reflection/List 200", "ok POST /Arith/Add text/plain 415"} {
		if !strings.Contains(lines, w+"\n") {
			t.Errorf("openapi.js output lacks %q:\n%s", w, lines)
		}
	}

	// One service only.
	out, errs, status = run(t, "", newDescribeCmd, "--openapi", addr, "Hello")
	if status != 0 || !strings.Contains(out, `"/Hello/Say"`) || strings.Contains(out, `"/Arith/Add"`) {
		t.Fatalf("describe --openapi Hello: status %d, stderr %q\n%s", status, errs, out)
	}
}

// TestDescribeProtoMatchesGateway: the files fleet describe --proto builds
// are, file for file, the ones the gateway's gRPC server reflection
// serves for the same services (the service's file and every file it
// imports), so the .proto matches what the gateway serves.
func TestDescribeProtoMatchesGateway(t *testing.T) {
	addr := startGatewayServer(t)
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stream, err := reflectv1.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.CloseSend()
	for _, svc := range []string{"Arith", "Hello"} {
		if err := stream.Send(&reflectv1.ServerReflectionRequest{MessageRequest: &reflectv1.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: svc}}); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		served := map[string]*descriptorpb.FileDescriptorProto{}
		for _, b := range resp.GetFileDescriptorResponse().GetFileDescriptorProto() {
			fd := &descriptorpb.FileDescriptorProto{}
			if err := proto.Unmarshal(b, fd); err != nil {
				t.Fatal(err)
			}
			served[fd.GetName()] = fd
		}

		o, err := openTarget(addr, &connFlags{timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		var d reflection.DescribeReply
		err = o.reflect(ctx, "Describe", &reflection.DescribeRequest{Service: svc}, &d)
		o.close()
		if err != nil {
			t.Fatal(err)
		}
		sp, err := buildServiceProto(d, svc, "")
		if err != nil {
			t.Fatal(err)
		}
		built := append([]protoreflect.FileDescriptor{sp.file}, sp.deps...)
		if len(built) != len(served) {
			t.Fatalf("%s: built %d files, the gateway serves %d (%v)", svc, len(built), len(served), slices.Collect(maps.Keys(served)))
		}
		for _, f := range built {
			got := protodesc.ToFileDescriptorProto(f)
			want := served[f.Path()]
			if !proto.Equal(got, want) {
				t.Errorf("%s: file %s differs from the gateway's\n got: %v\nwant: %v", svc, f.Path(), got, want)
			}
		}
	}
}

// TestDescribeProtoStreams: streaming methods of protobuf messages are
// declared with "stream" on the side that streams, a stream of Go types
// is left out and named on stderr (the gateway serves neither over gRPC),
// and the file compiles with protoc.
func TestDescribeProtoStreams(t *testing.T) {
	protoc := needTool(t, "protoc")
	srv := server.New(server.WithLogger(quietLogger()))
	if err := registerBuiltins(srv, false); err != nil {
		t.Fatal(err)
	}
	type Msg = benchpb.BenchmarkMessage
	errs := []error{
		server.Handle(srv, "Feed", "Get", func(ctx context.Context, in *Msg, out *Msg) error { return nil }),
		server.HandleServerStream(srv, "Feed", "Watch", func(ctx context.Context, in *Msg, st *server.ServerStream[Msg]) error { return nil }),
		server.HandleClientStream(srv, "Feed", "Push", func(ctx context.Context, st *server.ClientStream[Msg]) (*Msg, error) { return &Msg{}, nil }),
		server.HandleBidiStream(srv, "Feed", "Chat", func(ctx context.Context, st *server.BidiStream[Msg, Msg]) error { return nil }),
		server.HandleServerStream(srv, "Feed", "Lines", func(ctx context.Context, in *demo.Args, st *server.ServerStream[string]) error { return nil }),
	}
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	addr := testutil.Serve(t, srv)
	dir := t.TempDir()
	out, stderr, status := run(t, "", newDescribeCmd, "--proto", "--out", dir, addr, "Feed")
	if status != 0 || !strings.Contains(stderr, "left out Feed.Lines") {
		t.Fatalf("status %d, stderr %q, stdout %q", status, stderr, out)
	}
	src, err := os.ReadFile(filepath.Join(dir, "fleet", "gateway", "Feed.proto"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"rpc Chat ( stream pb.BenchmarkMessage ) returns ( stream pb.BenchmarkMessage );",
		"rpc Get ( pb.BenchmarkMessage ) returns ( pb.BenchmarkMessage );",
		"rpc Push ( stream pb.BenchmarkMessage ) returns ( pb.BenchmarkMessage );",
		"rpc Watch ( pb.BenchmarkMessage ) returns ( stream pb.BenchmarkMessage );",
	} {
		if !strings.Contains(string(src), want) {
			t.Errorf("Feed.proto lacks %q:\n%s", want, src)
		}
	}
	if strings.Contains(string(src), "Lines") {
		t.Errorf("Feed.proto declares Lines:\n%s", src)
	}
	cmd := exec.Command(protoc, "-I", dir, "-o", filepath.Join(t.TempDir(), "set.pb"), "fleet/gateway/Feed.proto")
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("protoc: %v\n%s\n%s", err, b, src)
	}
}
