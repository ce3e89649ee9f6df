package examples_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	greeterv1 "github.com/fleetrpc/fleet/examples/protofirst/gen/greeter/v1"
	"github.com/fleetrpc/fleet/gateway"
	"github.com/fleetrpc/fleet/server"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// The tests of examples/protofirst beyond its output (TestPrograms): the
// committed generated code is what `buf generate` writes, and grpcurl,
// through the gateway, sees the generated service under its .proto name
// with the .proto file it came from.

// external returns the path of a tool the test runs: on PATH or, for Go
// tools, in GOBIN or GOPATH/bin. Under CI (CI=true, where .ci/services.sh
// installs it) its absence fails the test; elsewhere it skips it.
func external(t *testing.T, name, installer string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, v := range []string{"GOBIN", "GOPATH"} {
		out, err := exec.Command("go", "env", v).Output()
		d := strings.TrimSpace(string(out))
		if err != nil || d == "" {
			continue
		}
		if v == "GOPATH" {
			d = filepath.Join(filepath.SplitList(d)[0], "bin")
		}
		if p := filepath.Join(d, name); fileExists(p) {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s not found; .ci/setup.d/%s installs it (bash .ci/services.sh)", name, installer)
	}
	t.Skipf("%s not installed; .ci/setup.d/%s installs it (bash .ci/services.sh)", name, installer)
	return ""
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// runTool runs a command in dir bounded by 2 minutes and returns its
// combined output.
func runTool(t *testing.T, dir, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestProtofirstGenerated lints examples/protofirst's .proto with buf,
// regenerates its code with `buf generate` and its buf.gen.yaml (the
// plugins run through `go tool`) and checks that the committed files
// under gen/ are exactly what it writes, no file more or less.
func TestProtofirstGenerated(t *testing.T) {
	buf := external(t, "buf", "70-protogen.sh")
	if b, err := runTool(t, "protofirst", buf, "lint"); err != nil {
		t.Errorf("buf lint (buf.yaml's STANDARD rules): %v\n%s", err, b)
	}
	out := t.TempDir()
	if b, err := runTool(t, "protofirst", buf, "generate", "--output", out); err != nil {
		t.Fatalf("buf generate: %v\n%s", err, b)
	}
	committed := treeFiles(t, filepath.Join("protofirst", "gen"))
	fresh := treeFiles(t, filepath.Join(out, "gen"))
	if len(fresh) == 0 {
		t.Fatal("buf generate wrote nothing")
	}
	for name, want := range fresh {
		got, ok := committed[name]
		switch {
		case !ok:
			t.Errorf("buf generate writes gen/%s, which is not committed (run buf generate in examples/protofirst)", name)
		case !bytes.Equal(got, want):
			t.Errorf("committed gen/%s differs from what buf generate writes (run buf generate in examples/protofirst)", name)
		}
	}
	for name := range committed {
		if _, ok := fresh[name]; !ok {
			t.Errorf("gen/%s is committed but buf generate no longer writes it", name)
		}
	}
}

// treeFiles returns the files under dir by their slash path relative to
// dir.
func treeFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return files
}

// greeter is a small implementation of the generated
// GreeterServiceServer that records the names it was called with.
type greeter struct {
	greeterv1.UnimplementedGreeterServiceServer
	mu    sync.Mutex
	names []string
}

func (g *greeter) saw(name string) {
	g.mu.Lock()
	g.names = append(g.names, name)
	g.mu.Unlock()
}

// called returns the names of the calls served so far, in order.
func (g *greeter) called() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.names)
}

func (g *greeter) SayHello(ctx context.Context, req *greeterv1.SayHelloRequest) (*greeterv1.SayHelloResponse, error) {
	g.saw(req.GetName())
	return &greeterv1.SayHelloResponse{Message: "hello, " + req.GetName()}, nil
}

// GreetMany sends req.Times greetings, "1 NAME", "2 NAME", ...; times
// outside 1 to 10 is InvalidArgument, as in examples/protofirst/main.go.
func (g *greeter) GreetMany(ctx context.Context, req *greeterv1.GreetManyRequest, st *server.ServerStream[greeterv1.GreetManyResponse]) error {
	g.saw(req.GetName())
	if req.GetTimes() < 1 || req.GetTimes() > 10 {
		return fleet.Errorf(fleet.InvalidArgument, "times must be 1 to 10, not %d", req.GetTimes())
	}
	for i := range req.GetTimes() {
		if err := st.Send(&greeterv1.GreetManyResponse{Message: fmt.Sprintf("%d %s", i+1, req.GetName())}); err != nil {
			return err
		}
	}
	return nil
}

// startGreeter serves a greeter behind a gateway with opts on 127.0.0.1
// until the test ends and returns the gateway's address (host:port) and
// the greeter.
func startGreeter(t *testing.T, opts ...gateway.Option) (string, *greeter) {
	t.Helper()
	srv := server.New(server.WithLogger(slog.New(slog.DiscardHandler)))
	g := &greeter{}
	if err := greeterv1.RegisterGreeterService(srv, g); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gw := gateway.New(srv, append([]gateway.Option{gateway.WithLogger(slog.New(slog.DiscardHandler))}, opts...)...)
	done := make(chan error, 1)
	go func() { done <- gw.Serve(lis) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := gw.Shutdown(ctx); err != nil {
			t.Errorf("gateway Shutdown: %v", err)
		}
		if err := <-done; !errors.Is(err, gateway.ErrClosed) {
			t.Errorf("gateway Serve: %v", err)
		}
	})
	return lis.Addr().String(), g
}

// TestProtofirstGrpcurl serves the generated GreeterService behind the gateway
// and calls it with grpcurl, which knows nothing but what reflection
// tells it: the service is listed as greeter.v1.GreeterService, its file is
// greeter/v1/greeter.proto as protoc-gen-go registered it (written back by
// -proto-out-dir and compared with the descriptor compiled into the Go
// package), both methods answer under /greeter.v1.GreeterService/<Method>, and
// grpc.health.v1 knows the service by that name. HTTP/JSON and the native
// generated client call the same port.
func TestProtofirstGrpcurl(t *testing.T) {
	grpcurl := external(t, "grpcurl", "60-gateway.sh")
	addr, _ := startGreeter(t)

	out, err := runTool(t, ".", grpcurl, "-plaintext", addr, "list")
	if err != nil {
		t.Fatalf("grpcurl list: %v\n%s", err, out)
	}
	if !strings.Contains("\n"+out, "\ngreeter.v1.GreeterService\n") {
		t.Fatalf("grpcurl list lacks greeter.v1.GreeterService:\n%s", out)
	}

	dir := t.TempDir()
	out, err = runTool(t, ".", grpcurl, "-plaintext", "-proto-out-dir", dir, addr, "describe", "greeter.v1.GreeterService")
	if err != nil {
		t.Fatalf("grpcurl describe: %v\n%s", err, out)
	}
	for _, want := range []string{
		"greeter.v1.GreeterService is a service:",
		"rpc SayHello ( .greeter.v1.SayHelloRequest ) returns ( .greeter.v1.SayHelloResponse );",
		"rpc GreetMany ( .greeter.v1.GreetManyRequest ) returns ( stream .greeter.v1.GreetManyResponse );",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("grpcurl describe lacks %q:\n%s", want, out)
		}
	}
	written, err := os.ReadFile(filepath.Join(dir, "greeter", "v1", "greeter.proto"))
	if err != nil {
		t.Fatalf("grpcurl -proto-out-dir did not write the .proto under its own path: %v", err)
	}
	fd, err := protoregistry.GlobalFiles.FindFileByPath("greeter/v1/greeter.proto")
	if err != nil {
		t.Fatal(err)
	}
	// The file grpcurl writes declares what the compiled-in descriptor
	// declares: every message and the service with both methods.
	fdp := protodesc.ToFileDescriptorProto(fd)
	checkProtoText(t, string(written), fdp)

	out, err = runTool(t, ".", grpcurl, "-plaintext", "-d", `{"name":"Ada"}`, addr, "greeter.v1.GreeterService/SayHello")
	if err != nil {
		t.Fatalf("grpcurl SayHello: %v\n%s", err, out)
	}
	var reply struct{ Message string }
	if err := json.Unmarshal([]byte(out), &reply); err != nil || reply.Message != "hello, Ada" {
		t.Fatalf("grpcurl SayHello printed %q (%v)", out, err)
	}
	out, err = runTool(t, ".", grpcurl, "-plaintext", "-d", `{"name":"Bo","times":3}`, addr, "greeter.v1.GreeterService/GreetMany")
	if err != nil {
		t.Fatalf("grpcurl GreetMany: %v\n%s", err, out)
	}
	for i := 1; i <= 3; i++ {
		if want := fmt.Sprintf(`"message": "%d Bo"`, i); !strings.Contains(out, want) {
			t.Errorf("grpcurl GreetMany lacks %s:\n%s", want, out)
		}
	}

	out, err = runTool(t, ".", grpcurl, "-plaintext", "-d", `{"service":"greeter.v1.GreeterService"}`, addr, "grpc.health.v1.Health/Check")
	if err != nil || !strings.Contains(out, `"SERVING"`) {
		t.Fatalf("grpcurl health of greeter.v1.GreeterService: %v\n%s", err, out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// HTTP/JSON on the same port, under the same names.
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/greeter.v1.GreeterService/SayHello", strings.NewReader(`{"name":"Cy"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	hc := &http.Client{}
	defer hc.CloseIdleConnections()
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "hello, Cy") {
		t.Fatalf("HTTP/JSON SayHello: %s %s", resp.Status, body)
	}

	c, err := client.Dial(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res, err := greeterv1.NewGreeterServiceClient(c).SayHello(ctx, &greeterv1.SayHelloRequest{Name: "native"})
	if err != nil || res.GetMessage() != "hello, native" {
		t.Fatalf("native SayHello on the gateway's port: %v %v", res, err)
	}
}

// checkProtoText checks that the .proto text src declares fdp's package,
// messages (with their fields) and services (with their methods).
func checkProtoText(t *testing.T, src string, fdp *descriptorpb.FileDescriptorProto) {
	t.Helper()
	want := []string{"package " + fdp.GetPackage() + ";"}
	for _, m := range fdp.GetMessageType() {
		want = append(want, "message "+m.GetName()+" {")
		for _, f := range m.GetField() {
			want = append(want, fmt.Sprintf(" %s = %d", f.GetName(), f.GetNumber()))
		}
	}
	for _, s := range fdp.GetService() {
		want = append(want, "service "+s.GetName()+" {")
		for _, m := range s.GetMethod() {
			want = append(want, "rpc "+m.GetName()+" (")
		}
	}
	for _, w := range want {
		if !strings.Contains(src, w) {
			t.Errorf("the .proto from reflection lacks %q:\n%s", w, src)
		}
	}
}
