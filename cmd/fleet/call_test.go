package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/internal/demo"
	"github.com/fleetrpc/fleet/internal/testutil"
	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/registry/etcd"
	"github.com/fleetrpc/fleet/registry/etcd/embedded"
	"github.com/fleetrpc/fleet/server"
	"github.com/fleetrpc/fleet/server/reflection"
)

// Ops is a service for the CLI tests: metadata, deadlines, a proto-free
// nested argument.
type Ops struct{}

// Order is a nested argument with tags.
type Order struct {
	ID    string   `json:"id"`
	Items []Item   `json:"items"`
	Notes []string `json:"notes,omitempty"`
}

// Item is one line of an Order.
type Item struct {
	SKU string `json:"sku"`
	Qty int    `json:"qty"`
}

// Total sums the quantities and echoes the "tenant" metadata back as
// response metadata.
func (Ops) Total(ctx context.Context, in *Order, out *map[string]int) error {
	fleet.SetResponseMetadata(ctx, "tenant-seen", fleet.IncomingMetadata(ctx)["tenant"])
	n := 0
	for _, it := range in.Items {
		n += it.Qty
	}
	*out = map[string]int{"total": n, "lines": len(in.Items)}
	return nil
}

// Wait blocks until its deadline and then fails with DeadlineExceeded,
// so the code is the same whether the client's timer or the server's
// answer ends the call first.
func (Ops) Wait(ctx context.Context, _ *struct{}, _ *struct{}) error {
	<-ctx.Done()
	return fleet.FromContextError(ctx.Err())
}

// startServer serves Arith, Hello and Ops on loopback, with health and
// reflection as the demo's servers have them.
func startServer(t *testing.T, opts ...server.Option) string {
	t.Helper()
	return startServerBuiltins(t, true, opts...)
}

// startServerBuiltins is startServer, without health and reflection
// unless builtins is set.
func startServerBuiltins(t *testing.T, builtins bool, opts ...server.Option) string {
	t.Helper()
	srv := server.New(append([]server.Option{server.WithLogger(quietLogger())}, opts...)...)
	if builtins {
		if err := registerBuiltins(srv, false); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range []any{demo.Arith{}, &demo.Hello{}, Ops{}} {
		if err := srv.Register(r); err != nil {
			t.Fatal(err)
		}
	}
	return testutil.Serve(t, srv)
}

// run executes a fresh command as main would and returns its stdout,
// stderr and exit status.
func run(t *testing.T, stdin string, newCmd func() *cobra.Command, args ...string) (stdout, stderr string, status int) {
	t.Helper()
	cmd := newCmd()
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	var out, errb bytes.Buffer
	cmd.SetArgs(args)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	err := cmd.ExecuteContext(context.Background())
	if err != nil {
		errb.WriteString("fleet: " + err.Error() + "\n")
	}
	return out.String(), errb.String(), exitStatus(err)
}

func TestCallGoTypes(t *testing.T) {
	addr := startServer(t)
	file := filepath.Join(t.TempDir(), "args.json")
	if err := os.WriteFile(file, []byte(`{"A":6,"B":7}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
		want  string
	}{
		{"positional", "", []string{addr, "Arith.Add", `{"A":1,"B":2}`}, "3\n"},
		{"-d", "", []string{addr, "Arith.Mul", "-d", `{"A":6,"B":7}`}, "42\n"},
		{"-d @file", "", []string{addr, "Arith.Mul", "-d", "@" + file}, "42\n"},
		{"-d @-", `{"A":9,"B":3}`, []string{addr, "Arith.Div", "-d", "@-"}, "3\n"},
		{"codec json", "", []string{"--codec", "json", addr, "Arith.Add", `{"A":1,"B":2}`}, "3\n"},
		{"codec msgpack", "", []string{"--codec", "msgpack", addr, "Arith.Add", `{"A":1,"B":2}`}, "3\n"},
		{"nested", "", []string{addr, "Ops.Total", `{"id":"o1","items":[{"sku":"a","qty":2},{"sku":"b","qty":5}]}`}, "{\n  \"lines\": 2,\n  \"total\": 7\n}\n"},
		{"nested msgpack", "", []string{"--codec", "msgpack", addr, "Ops.Total", `{"ID":"o1","Items":[{"SKU":"a","Qty":2}]}`}, "{\n  \"lines\": 1,\n  \"total\": 2\n}\n"},
		{"reflection itself", "", []string{addr, "fleet.Reflection.Describe", `{"service":"Arith","method":"Add"}`}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errs, status := run(t, tc.stdin, newCallCmd, tc.args...)
			if status != 0 {
				t.Fatalf("status %d, stderr %q", status, errs)
			}
			if tc.want != "" && out != tc.want {
				t.Fatalf("stdout %q, want %q", out, tc.want)
			}
			if !json.Valid([]byte(out)) {
				t.Fatalf("stdout is not JSON: %q", out)
			}
		})
	}
}

func TestCallProtobuf(t *testing.T) {
	addr := startServer(t)
	out, errs, status := run(t, "", newCallCmd, "-v", addr, "Hello.Say", `{"field1":"hi","field2":1,"field3":42,"field9":"nine"}`)
	if status != 0 {
		t.Fatalf("status %d, stderr %q", status, errs)
	}
	var reply map[string]any
	if err := json.Unmarshal([]byte(out), &reply); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, out)
	}
	// Hello.Say answers field1 "OK", field2 100 and echoes field3, field9.
	if reply["field1"] != "OK" || reply["field2"] != float64(100) || reply["field3"] != float64(42) || reply["field9"] != "nine" {
		t.Fatalf("reply %v", reply)
	}
	if !strings.Contains(errs, "codec protobuf") || !strings.Contains(errs, "pb.BenchmarkMessage (protobuf)") {
		t.Fatalf("verbose output lacks the codec or types: %q", errs)
	}
	// protojson rejects a field the message does not have: bad input.
	_, errs, status = run(t, "", newCallCmd, addr, "Hello.Say", `{"nope":1}`)
	if status != exitUsage || !strings.Contains(errs, "pb.BenchmarkMessage") {
		t.Fatalf("unknown field: status %d, stderr %q", status, errs)
	}
}

func TestCallMetadataVerbose(t *testing.T) {
	addr := startServer(t)
	out, errs, status := run(t, "", newCallCmd, "-v", "-H", "tenant: blue", addr, "Ops.Total", `{"id":"o1","items":[{"qty":1}]}`)
	if status != 0 {
		t.Fatalf("status %d, stderr %q", status, errs)
	}
	if !strings.Contains(out, `"total": 1`) {
		t.Fatalf("stdout %q", out)
	}
	for _, want := range []string{"server:   " + addr, "status:   ok", "elapsed:  ", "response metadata:\n  tenant-seen: blue\n", "codec json"} {
		if !strings.Contains(errs, want) {
			t.Fatalf("verbose output lacks %q:\n%s", want, errs)
		}
	}
}

// TestCallExitStatus checks the documented exit status of each failure
// and that stderr carries the code and the message.
func TestCallExitStatus(t *testing.T) {
	addr := startServer(t)
	guarded := startServer(t, server.WithAuth(func(ctx context.Context, _ *fleet.CallInfo, token string) error {
		if token != "s3cret" {
			return errors.New("bad token")
		}
		return nil
	}))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := lis.Addr().String()
	lis.Close() // nothing listens there now
	for _, tc := range []struct {
		name   string
		args   []string
		status int
		stderr string
	}{
		{"handler error", []string{addr, "Arith.Div", `{"A":1,"B":0}`}, 64 + 2, "Arith.Div: unknown (2): divide by zero"},
		{"unknown method", []string{addr, "Arith.Nope", `{}`}, 64 + 5, `not_found (5): unknown method "Nope" of service "Arith"`},
		{"unknown service", []string{addr, "Nope.Add", `{}`}, 64 + 5, `unknown service "Nope"`},
		{"unknown method json", []string{"--codec", "json", addr, "Arith.Nope", `{}`}, 64 + 5, "not_found (5)"},
		{"wrong JSON shape", []string{"--codec", "json", addr, "Arith.Add", `{"A":"x"}`}, 64 + 3, "invalid_argument (3): decode arguments"},
		{"deadline", []string{"--timeout", "300ms", addr, "Ops.Wait", `{}`}, 64 + 4, "deadline_exceeded (4)"},
		{"no token", []string{guarded, "Arith.Add", `{"A":1,"B":2}`}, 64 + 16, "unauthenticated (16): bad token"},
		{"nothing listens", []string{closed, "Arith.Add", `{"A":1,"B":2}`}, 64 + 14, "unavailable (14)"},
		{"malformed JSON", []string{addr, "Arith.Add", `{"A":1,`}, exitUsage, "not valid JSON"},
		{"malformed JSON msgpack", []string{"--codec", "msgpack", addr, "Arith.Add", `{"A":1,`}, exitUsage, "not valid JSON"},
		{"malformed target", []string{"nohost", "Arith.Add", `{}`}, exitUsage, "want host:port"},
		{"unknown scheme", []string{"gopher://x:1/Arith", "Arith.Add", `{}`}, exitUsage, `unknown scheme "gopher"`},
		{"no service in URL", []string{"static://127.0.0.1:1", "Arith.Add", `{}`}, exitUsage, "no service name"},
		{"bad method", []string{addr, "Add", `{}`}, exitUsage, "want Service.Method"},
		{"bad header", []string{"-H", "novalue", addr, "Arith.Add", `{}`}, exitUsage, "want key:value"},
		{"bad codec", []string{"--codec", "xml", addr, "Arith.Add", `{}`}, exitUsage, "--codec"},
		{"protobuf for Go types", []string{"--codec", "protobuf", addr, "Arith.Add", `{}`}, exitUsage, "not protobuf messages"},
		{"missing file", []string{addr, "Arith.Add", "-d", "@/nonexistent/x.json"}, exitUsage, "x.json"},
		{"both data forms", []string{addr, "Arith.Add", "{}", "-d", "{}"}, exitUsage, "not both"},
		{"unknown flag", []string{"--nope", addr, "Arith.Add"}, exitUsage, "unknown flag"},
		{"too few args", []string{addr}, exitUsage, "want call TARGET"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errs, status := run(t, "", newCallCmd, tc.args...)
			if status != tc.status || !strings.Contains(errs, tc.stderr) {
				t.Fatalf("status %d, stderr %q; want %d and %q", status, errs, tc.status, tc.stderr)
			}
			if out != "" {
				t.Fatalf("stdout %q on failure", out)
			}
		})
	}
	out, errs, status := run(t, "", newCallCmd, "--token", "s3cret", guarded, "Arith.Add", `{"A":1,"B":2}`)
	if status != 0 || out != "3\n" {
		t.Fatalf("with token: status %d, stdout %q, stderr %q", status, out, errs)
	}
}

func TestCallWithoutReflection(t *testing.T) {
	addr := startServerBuiltins(t, false)
	out, errs, status := run(t, "", newCallCmd, addr, "Arith.Add", `{"A":1,"B":2}`)
	if status != 0 || out != "3\n" {
		t.Fatalf("status %d, stdout %q, stderr %q", status, out, errs)
	}
	_, errs, status = run(t, "", newListCmd, addr)
	if status != 64+int(fleet.Unimplemented) || !strings.Contains(errs, "reflection.Register") {
		t.Fatalf("list: status %d, stderr %q", status, errs)
	}
}

func TestCallTLS(t *testing.T) {
	srvCfg, _ := testutil.TLSConfigs(t)
	srv := server.New(server.WithTLS(srvCfg), server.WithLogger(quietLogger()))
	if err := registerBuiltins(srv, false); err != nil {
		t.Fatal(err)
	}
	if err := srv.Register(demo.Arith{}); err != nil {
		t.Fatal(err)
	}
	lis, err := srv.Listen("tls", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(lis) }()
	defer func() { srv.Close(); <-done }()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvCfg.Certificates[0].Certificate[0]}), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, flags := range [][]string{{"--cacert", ca}, {"--tls", "--insecure"}} {
		out, errs, status := run(t, "", newCallCmd, append(flags, addr, "Arith.Add", `{"A":2,"B":2}`)...)
		if status != 0 || out != "4\n" {
			t.Fatalf("%v: status %d, stdout %q, stderr %q", flags, status, out, errs)
		}
	}
	// Verification fails without the CA (the system roots do not know it).
	_, errs, status := run(t, "", newCallCmd, "--tls", addr, "Arith.Add", `{"A":2,"B":2}`)
	if status != 64+int(fleet.Unavailable) || !strings.Contains(errs, "tls") {
		t.Fatalf("unknown CA: status %d, stderr %q", status, errs)
	}
}

func TestListAndDescribe(t *testing.T) {
	addr := startServer(t)
	out, errs, status := run(t, "", newListCmd, addr)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if status != 0 || !slices.IsSorted(lines) {
		t.Fatalf("list: status %d, stdout %q, stderr %q", status, out, errs)
	}
	for _, want := range []string{"Arith", "Hello", "Ops", "fleet.Reflection"} {
		if !slices.Contains(lines, want) {
			t.Fatalf("list: stdout %q lacks %s", out, want)
		}
	}
	out, _, status = run(t, "", newListCmd, addr, "Arith")
	if status != 0 || out != "Arith.Add\nArith.Div\nArith.Mul\n" {
		t.Fatalf("list Arith: status %d, stdout %q", status, out)
	}
	_, errs, status = run(t, "", newListCmd, addr, "Nope")
	if status != 64+int(fleet.NotFound) || !strings.Contains(errs, `unknown service "Nope"`) {
		t.Fatalf("list Nope: status %d, stderr %q", status, errs)
	}
	out, _, status = run(t, "", newListCmd, "--json", addr)
	var list reflection.ListReply
	if status != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list.Codecs) == 0 || len(list.Services) < 4 {
		t.Fatalf("list --json: status %d, stdout %q", status, out)
	}

	out, errs, status = run(t, "", newDescribeCmd, addr, "Arith.Add")
	for _, want := range []string{"Arith.Add\n", "  args: demo.Args\n", `    JSON: {"A":0,"B":0}`, "  reply: int\n", `"type": "integer"`} {
		if status != 0 || !strings.Contains(out, want) {
			t.Fatalf("describe Arith.Add: status %d, stderr %q, stdout lacks %q:\n%s", status, errs, want, out)
		}
	}
	out, _, status = run(t, "", newDescribeCmd, addr, "Hello.Say")
	for _, want := range []string{"  args: pb.BenchmarkMessage (Go benchpb.BenchmarkMessage)", "message pb.BenchmarkMessage {", "required string field1 = 1;", "repeated fixed64 field5 = 5;", `JSON (protojson): {"field1":`} {
		if status != 0 || !strings.Contains(out, want) {
			t.Fatalf("describe Hello.Say: status %d, stdout lacks %q:\n%s", status, want, out)
		}
	}
	out, _, status = run(t, "", newDescribeCmd, addr, "Ops")
	if status != 0 || !strings.Contains(out, "Ops.Total\n") || !strings.Contains(out, "Ops.Wait\n") || !strings.Contains(out, `"sku"`) {
		t.Fatalf("describe Ops: status %d\n%s", status, out)
	}
	out, _, status = run(t, "", newDescribeCmd, addr, "fleet.Reflection")
	if status != 0 || !strings.Contains(out, "fleet.Reflection.List\n") {
		t.Fatalf("describe fleet.Reflection: status %d\n%s", status, out)
	}
	out, _, status = run(t, "", newDescribeCmd, "--json", addr, "Hello.Say")
	var d reflection.DescribeReply
	if status != 0 || json.Unmarshal([]byte(out), &d) != nil || d.Methods[0].Args.Protobuf != "pb.BenchmarkMessage" {
		t.Fatalf("describe --json: status %d\n%s", status, out)
	}
	_, errs, status = run(t, "", newDescribeCmd, addr, "Arith.Nope")
	if status != 64+int(fleet.NotFound) || !strings.Contains(errs, `unknown method "Nope"`) {
		t.Fatalf("describe Arith.Nope: status %d, stderr %q", status, errs)
	}
}

// TestCallThroughRegistries calls through a static list and through a
// real (in-process) etcd, and checks a registry that is down fails with
// unavailable within the timeout.
func TestCallThroughRegistries(t *testing.T) {
	a, b := startServer(t), startServer(t)
	static := "static://" + a + "," + b + "/Arith"
	for _, sel := range []string{"roundrobin", "random", "p2c"} {
		out, errs, status := run(t, "", newCallCmd, "--selector", sel, "--failmode", "failfast", static, "Arith.Add", `{"A":20,"B":22}`)
		if status != 0 || out != "42\n" {
			t.Fatalf("%s: status %d, stdout %q, stderr %q", static, status, out, errs)
		}
	}
	out, _, status := run(t, "", newListCmd, static)
	if status != 0 || !strings.Contains(out, "Arith\n") {
		t.Fatalf("list %s: %d %q", static, status, out)
	}
	_, errs, status := run(t, "", newCallCmd, static, "Hello.Say", `{}`)
	if status != exitUsage || !strings.Contains(errs, `names service "Arith"`) {
		t.Fatalf("service mismatch: status %d, stderr %q", status, errs)
	}
	_, errs, status = run(t, "", newCallCmd, "--selector", "nope", static, "Arith.Add", `{}`)
	if status != exitUsage || !strings.Contains(errs, "--selector") {
		t.Fatalf("bad selector: status %d, stderr %q", status, errs)
	}

	etcdSrv, err := embedded.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer etcdSrv.Close()
	reg, err := etcd.NewRegistrar(etcd.Config{Endpoints: []string{etcdSrv.Addr()}, TTL: 10 * time.Second, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, addr := range []string{a, b} {
		if err := reg.Register(ctx, registry.Instance{Service: "Hello", Addr: addr}); err != nil {
			t.Fatal(err)
		}
	}
	target := "etcd://" + etcdSrv.Addr() + "/Hello"
	out, errs, status = run(t, "", newCallCmd, "--selector", "roundrobin", target, "Hello.Say", `{"field1":"x","field2":1,"field3":7}`)
	if status != 0 || !strings.Contains(out, `"field3": 7`) {
		t.Fatalf("%s: status %d, stdout %q, stderr %q", target, status, out, errs)
	}
	out, _, status = run(t, "", newDescribeCmd, target, "Hello.Say")
	if status != 0 || !strings.Contains(out, "message pb.BenchmarkMessage {") {
		t.Fatalf("describe %s: %d\n%s", target, status, out)
	}
	_, errs, status = run(t, "", newCallCmd, "etcd://"+etcdSrv.Addr()+"/Nobody", "Nobody.Do", `{}`)
	if status != 64+int(fleet.Unavailable) || !strings.Contains(errs, `no instance of service "Nobody"`) {
		t.Fatalf("no instance: status %d, stderr %q", status, errs)
	}

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := lis.Addr().String()
	lis.Close()
	_, errs, status = run(t, "", newCallCmd, "--timeout", "2s", "etcd://"+down+"/Hello", "Hello.Say", `{}`)
	if status != 64+int(fleet.Unavailable) || !strings.Contains(errs, "registry") {
		t.Fatalf("registry down: status %d, stderr %q", status, errs)
	}
}
