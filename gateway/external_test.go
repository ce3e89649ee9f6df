package gateway_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetrpc/fleet/gateway"
)

// The clients in this file were written by others: grpcurl and Node's
// @grpc/grpc-js. .ci/setup.d/60-gateway.sh installs both; a missing tool
// fails the test with the command that installs it.

const setupHint = "run `bash -c 'log(){ echo $*; }; die(){ exit 1; }; source .ci/setup.d/60-gateway.sh'` from the repository root"

func grpcurlPath(t *testing.T) string {
	if p, err := exec.LookPath("grpcurl"); err == nil {
		return p
	}
	// Where `go install` put it: GOBIN, else GOPATH/bin.
	var dirs []string
	for _, v := range []string{"GOBIN", "GOPATH"} {
		out, err := exec.Command("go", "env", v).Output()
		if d := strings.TrimSpace(string(out)); err == nil && d != "" {
			if v == "GOPATH" {
				d = filepath.Join(filepath.SplitList(d)[0], "bin")
			}
			dirs = append(dirs, d)
		}
	}
	for _, d := range dirs {
		p := filepath.Join(d, "grpcurl")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatalf("grpcurl not found on PATH nor in %v: %s", dirs, setupHint)
	return ""
}

// run runs a command bounded by 30 s and returns its combined output.
func run(t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestGrpcurl(t *testing.T) {
	bin := grpcurlPath(t)
	_, addr := start(t, nil, gateway.WithProtoPackage("fleet.demo"))

	out, err := run(t, bin, "-plaintext", addr, "list")
	if err != nil {
		t.Fatalf("grpcurl list: %v\n%s", err, out)
	}
	for _, want := range []string{"fleet.demo.Arith", "fleet.demo.Hello", "fleet.demo.Probe", "grpc.health.v1.Health"} {
		if !strings.Contains(out, want) {
			t.Fatalf("grpcurl list lacks %s:\n%s", want, out)
		}
	}
	out, err = run(t, bin, "-plaintext", addr, "describe", "fleet.demo.Arith")
	if err != nil || !strings.Contains(out, "rpc Add ( .fleet.gotypes.demo.Args ) returns ( .fleet.gotypes.Int )") {
		t.Fatalf("grpcurl describe Arith: %v\n%s", err, out)
	}
	out, err = run(t, bin, "-plaintext", "-max-time", "20", "-d", `{"A":1,"B":2}`, addr, "fleet.demo.Arith/Add")
	if err != nil || !strings.Contains(out, `"value": "3"`) {
		t.Fatalf("grpcurl Arith/Add: %v\n%s", err, out)
	}
	out, err = run(t, bin, "-plaintext", "-max-time", "20", "-d", `{"A":1,"B":0}`, addr, "fleet.demo.Arith/Div")
	if err == nil || !strings.Contains(out, "divide by zero") {
		t.Fatalf("grpcurl Arith/Div: %v\n%s", err, out)
	}
	out, err = run(t, bin, "-plaintext", addr, "describe", "fleet.demo.Hello")
	if err != nil || !strings.Contains(out, "rpc Say ( .pb.BenchmarkMessage ) returns ( .pb.BenchmarkMessage )") {
		t.Fatalf("grpcurl describe: %v\n%s", err, out)
	}
	out, err = run(t, bin, "-plaintext", "-max-time", "20", "-d", `{"field1":"hi","field2":1,"field3":7}`, addr, "fleet.demo.Hello/Say")
	if err != nil || !strings.Contains(out, `"field1": "OK"`) || !strings.Contains(out, `"field3": 7`) {
		t.Fatalf("grpcurl Hello/Say: %v\n%s", err, out)
	}
	out, err = run(t, bin, "-plaintext", "-max-time", "20", "-d", `{"field1":"fail:9","field2":1,"field3":7}`, addr, "fleet.demo.Probe/Say")
	if err == nil || !strings.Contains(out, "FailedPrecondition") || !strings.Contains(out, "failed as asked") {
		t.Fatalf("grpcurl Probe/Say error: %v\n%s", err, out)
	}
	out, err = run(t, bin, "-plaintext", "-max-time", "20", addr, "grpc.health.v1.Health/Check")
	if err != nil || !strings.Contains(out, "SERVING") {
		t.Fatalf("grpcurl health: %v\n%s", err, out)
	}
}

func TestNodeClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node not found: %s", setupHint)
	}
	if _, err := os.Stat(filepath.Join("testdata", "node", "node_modules", "@grpc", "grpc-js")); err != nil {
		t.Fatalf("@grpc/grpc-js not installed in testdata/node: %s", setupHint)
	}
	_, addr := start(t, nil)
	out, err := run(t, node, filepath.Join("testdata", "node", "client.js"), addr)
	if err != nil || !strings.Contains(out, "ok Hello.Say") || !strings.Contains(out, "ok Probe.Say code 9") {
		t.Fatalf("node client: %v\n%s", err, out)
	}
}

// TestGrpcurlStreams calls each kind of Fleet stream with grpcurl, which
// learns the methods' shapes from server reflection.
func TestGrpcurlStreams(t *testing.T) {
	bin := grpcurlPath(t)
	_, addr := streamGateway(t)

	out, err := run(t, bin, "-plaintext", addr, "describe", "fleet.demo.Feed")
	for _, want := range []string{
		"rpc Echo ( stream .pb.BenchmarkMessage ) returns ( stream .pb.BenchmarkMessage )",
		"rpc List ( .pb.BenchmarkMessage ) returns ( stream .pb.BenchmarkMessage )",
		"rpc Sum ( stream .pb.BenchmarkMessage ) returns ( .pb.BenchmarkMessage )",
	} {
		if err != nil || !strings.Contains(out, want) {
			t.Fatalf("grpcurl describe lacks %q: %v\n%s", want, err, out)
		}
	}
	out, err = run(t, bin, "-plaintext", "-max-time", "20", "-d", `{"field1":"hi","field2":3,"field3":7}`, addr, "fleet.demo.Feed/List")
	if err != nil || strings.Count(out, `"field3": 7`) != 3 || !strings.Contains(out, `"field2": 2`) {
		t.Fatalf("grpcurl Feed/List: %v\n%s", err, out)
	}
	out, err = run(t, bin, "-plaintext", "-max-time", "20", "-d", `{"field1":"a","field2":4,"field3":1} {"field1":"b","field2":5,"field3":1}`, addr, "fleet.demo.Feed/Sum")
	if err != nil || !strings.Contains(out, `"field2": 9`) || !strings.Contains(out, `"field3": 2`) {
		t.Fatalf("grpcurl Feed/Sum: %v\n%s", err, out)
	}
	out, err = run(t, bin, "-plaintext", "-max-time", "20", "-d", `{"field1":"a","field2":1,"field3":1} {"field1":"b","field2":1,"field3":1}`, addr, "fleet.demo.Gen/Upper")
	if err != nil || !strings.Contains(out, `"field1": "upper:a"`) || !strings.Contains(out, `"field1": "upper:b"`) {
		t.Fatalf("grpcurl Gen/Upper: %v\n%s", err, out)
	}
	out, err = run(t, bin, "-plaintext", "-max-time", "20", "-d", `{"field1":"fail:9","field2":2,"field3":7}`, addr, "fleet.demo.Feed/List")
	if err == nil || strings.Count(out, `"field3": 7`) != 2 || !strings.Contains(out, "FailedPrecondition") || !strings.Contains(out, "failed as asked") {
		t.Fatalf("grpcurl Feed/List error mid-stream: %v\n%s", err, out)
	}
}

// TestNodeClientStreams calls each kind of Fleet stream from Node's
// @grpc/grpc-js (testdata/node/stream.js).
func TestNodeClientStreams(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node not found: %s", setupHint)
	}
	if _, err := os.Stat(filepath.Join("testdata", "node", "node_modules", "@grpc", "grpc-js")); err != nil {
		t.Fatalf("@grpc/grpc-js not installed in testdata/node: %s", setupHint)
	}
	_, addr := streamGateway(t)
	out, err := run(t, node, filepath.Join("testdata", "node", "stream.js"), addr)
	for _, want := range []string{"ok Feed.List 3 messages", "ok Feed.List error code 9 after 2", "ok Gen.Upper", "ok Feed.Sum"} {
		if err != nil || !strings.Contains(out, want) {
			t.Fatalf("node stream client lacks %q: %v\n%s", want, err, out)
		}
	}
}
