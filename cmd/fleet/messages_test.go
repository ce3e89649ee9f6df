package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fleetrpc/fleet/internal/demo"
	"github.com/fleetrpc/fleet/internal/testutil"
	"github.com/fleetrpc/fleet/server"
)

// TestCLIMessages runs the commands into the mistakes a new user makes and
// checks the message and exit status each gets, one row per message, each
// against a real server (or an HTTP or TLS server where the row is about
// one).
func TestCLIMessages(t *testing.T) {
	addr := startServer(t)
	httpSrv := httptest.NewServer(http.NotFoundHandler())
	defer httpSrv.Close()
	httpAddr := httpSrv.Listener.Addr().String()
	tlsAddr := startTLSServer(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := lis.Addr().String()
	lis.Close() // nothing listens there now

	// The template describe prints for a protobuf message.
	descOut, descErr, status := run(t, "", newDescribeCmd, addr, "Hello.Say")
	const tmplPrefix = "JSON (protojson): "
	i := strings.Index(descOut, tmplPrefix)
	if status != 0 || i < 0 {
		t.Fatalf("describe Hello.Say: status %d, stdout %q, stderr %q", status, descOut, descErr)
	}
	protoTmpl, _, _ := strings.Cut(descOut[i+len(tmplPrefix):], "\n")

	for _, tc := range []struct {
		name   string
		cmd    string // call (default), list, describe
		args   []string
		status int
		stderr []string // each must appear
		not    []string // none may appear
		stdout string   // checked when status is 0
	}{
		{name: "address once", args: []string{closed, "Arith.Add", `{"A":1,"B":2}`}, status: 64 + 14,
			stderr: []string{"connect " + closed + ": unavailable (14): connection refused"}, not: []string{"dial tcp"}},
		{name: "HTTP peer named", args: []string{httpAddr, "Arith.Add", `{"A":1,"B":2}`}, status: 64 + 14,
			stderr: []string{httpAddr + " answers HTTP, not Fleet's protocol"}, not: []string{"frame of", "deadline"}},
		{name: "TLS peer named", args: []string{tlsAddr, "Arith.Add", `{"A":1,"B":2}`}, status: 64 + 14,
			stderr: []string{tlsAddr + " speaks TLS: add --tls"}},
		{name: "http URL is not a registry", args: []string{"http://" + addr, "Arith.Add", `{"A":1,"B":2}`}, status: exitUsage,
			stderr: []string{"is an HTTP URL", "give a Fleet server as host:port (" + addr + ")"}, not: []string{"registry address"}},
		{name: "timeout while dialling", args: []string{"--timeout", "1ns", addr, "Arith.Add", `{"A":1,"B":2}`}, status: 64 + 4,
			stderr: []string{"deadline_exceeded (4): --timeout 1ns ran out while connecting"}, not: []string{"unavailable", "i/o timeout"}},
		{name: "near-miss service", args: []string{addr, "arith.add", `{"A":1,"B":2}`}, status: 64 + 5,
			stderr: []string{`unknown service "arith"; did you mean Arith.Add?`}},
		{name: "near-miss method", args: []string{addr, "Arith.Ad", `{"A":1,"B":2}`}, status: 64 + 5,
			stderr: []string{`unknown method "Ad" of service "Arith"; did you mean Arith.Add?`}},
		{name: "near-miss method, json codec", args: []string{"--codec", "json", addr, "Arith.mul", `{"A":1,"B":2}`}, status: 64 + 5,
			stderr: []string{"did you mean Arith.Mul?"}},
		{name: "far-off service", args: []string{addr, "Nope.Add", `{}`}, status: 64 + 5,
			stderr: []string{`unknown service "Nope"; the server has Arith, Hello, Ops`}},
		{name: "far-off method", args: []string{addr, "Arith.Sqrt", `{}`}, status: 64 + 5,
			stderr: []string{"Arith has Add, Div, Mul"}},
		{name: "near-miss in list", cmd: "list", args: []string{addr, "Hello2"}, status: 64 + 5,
			stderr: []string{`unknown service "Hello2"; did you mean service Hello?`}},
		{name: "near-miss in describe", cmd: "describe", args: []string{addr, "Hello.Sya"}, status: 64 + 5,
			stderr: []string{"did you mean Hello.Say?"}},
		{name: "JSON error: line and column", args: []string{addr, "Arith.Add", "{\n  \"A\": 1,\n  \"B\": 2,,\n}"}, status: exitUsage,
			stderr: []string{"line 3, column 10: invalid character ','"}},
		{name: "JSON error: end of input", args: []string{addr, "Arith.Add", `{"A":1,`}, status: exitUsage,
			stderr: []string{"line 1, column 8: unexpected end of input"}},
		{name: "JSON error: trailing data", args: []string{addr, "Arith.Add", `{"A":1,"B":2} x`}, status: exitUsage,
			stderr: []string{"line 1, column 15: data after the JSON value"}},
		{name: "JSON error, msgpack codec", args: []string{"--codec", "msgpack", addr, "Arith.Add", "{\n,"}, status: exitUsage,
			stderr: []string{"line 2, column 1"}},
		{name: "unknown field", args: []string{addr, "Arith.Add", `{"A":1,"Bb":2}`}, status: exitUsage,
			stderr: []string{`unknown field "Bb" in the argument (demo.Args) of Arith.Add (did you mean "B"? its fields: A, B); --loose`}},
		{name: "missing field", args: []string{addr, "Arith.Add", `{"A":1}`}, status: exitUsage,
			stderr: []string{`missing field "B" in the argument (demo.Args) of Arith.Add (give its zero value, 0, or --loose`}},
		{name: "unknown nested field", args: []string{addr, "Ops.Total", `{"id":"o1","items":[{"sku":"a","qty":2,"price":3}]}`}, status: exitUsage,
			stderr: []string{`unknown field "price" in items[0] of Ops.Total`}},
		{name: "keys match as encoding/json matches", args: []string{addr, "Arith.Add", `{"a":1,"b":2}`}, stdout: "3\n"},
		{name: "omitempty field may be left out", args: []string{addr, "Ops.Total", `{"id":"o1","items":[{"sku":"a","qty":2}]}`},
			stdout: "{\n  \"lines\": 1,\n  \"total\": 2\n}\n"},
		{name: "--loose: unknown and missing fields sent", args: []string{"--loose", addr, "Arith.Add", `{"A":1,"Bb":2}`}, stdout: "1\n"},
		{name: "protobuf unknown field", args: []string{addr, "Hello.Say", `{"field1":"x","field2":1,"field3":2,"nope":1}`}, status: exitUsage,
			stderr: []string{`unknown field "nope"`, "--loose"}},
		{name: "protobuf missing required field", args: []string{addr, "Hello.Say", `{"field1":"x"}`}, status: exitUsage,
			stderr: []string{"required field", "--loose"}},
		{name: "describe's template accepted as is", args: []string{addr, "Hello.Say", protoTmpl}, stdout: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			newCmd := newCallCmd
			switch tc.cmd {
			case "list":
				newCmd = newListCmd
			case "describe":
				newCmd = newDescribeCmd
			}
			out, errs, status := run(t, "", newCmd, tc.args...)
			if status != tc.status {
				t.Fatalf("status %d, want %d; stderr %q", status, tc.status, errs)
			}
			for _, want := range tc.stderr {
				if !strings.Contains(errs, want) {
					t.Errorf("stderr %q lacks %q", errs, want)
				}
			}
			for _, bad := range tc.not {
				if strings.Contains(errs, bad) {
					t.Errorf("stderr %q holds %q", errs, bad)
				}
			}
			if status == 0 && tc.stdout != "" && out != tc.stdout {
				t.Errorf("stdout %q, want %q", out, tc.stdout)
			}
			if status != 0 && out != "" {
				t.Errorf("stdout %q on failure", out)
			}
		})
	}

	t.Run("describe's template has no nulls", func(t *testing.T) {
		if strings.Contains(protoTmpl, "null") || !strings.Contains(protoTmpl, `"field1":""`) {
			t.Fatalf("template %s", protoTmpl)
		}
	})

	t.Run("demo: killed on a line of its own", func(t *testing.T) {
		var out, errb bytes.Buffer
		err := runDemo(context.Background(), demoFlags{calls: 100, callers: 4, selector: "weighted", failMode: "failover"}, &out, &errb)
		if err != nil {
			t.Fatalf("demo: %v\n%s", err, errb.String())
		}
		stderr := errb.String()
		if !strings.Contains(stderr, ")\nkilled 127.0.0.1:") || strings.Contains(stderr, "\rkilled") {
			t.Fatalf("the kill message does not start a line of its own after the progress line:\n%q", stderr)
		}
	})
}

// startTLSServer serves Arith over TLS on loopback.
func startTLSServer(t *testing.T) string {
	t.Helper()
	srvCfg, _ := testutil.TLSConfigs(t)
	srv := server.New(server.WithTLS(srvCfg), server.WithLogger(quietLogger()))
	if err := srv.Register(demo.Arith{}); err != nil {
		t.Fatal(err)
	}
	lis, err := srv.Listen("tls", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(lis) }()
	t.Cleanup(func() { srv.Close(); <-done })
	return lis.Addr().String()
}

func TestEditDistanceAndNearest(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		d    int
	}{
		{"", "", 0}, {"add", "Add", 1}, {"Sya", "Say", 1}, {"Ad", "Add", 1},
		{"kitten", "sitting", 3}, {"Nope", "Arith", 5},
	} {
		if d := editDistance(tc.a, tc.b); d != tc.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, d, tc.d)
		}
	}
	names := []string{"Arith", "Hello", "Ops"}
	for in, want := range map[string]string{"arith": "Arith", "Helo": "Hello", "Aritj": "Arith", "Nope": "", "Op": "Ops", "Xy": ""} {
		if got := nearest(in, names); got != want {
			t.Errorf("nearest(%q) = %q, want %q", in, got, want)
		}
	}
	for _, tc := range []struct {
		in        string
		i         int
		line, col int
	}{{"abc", 0, 1, 1}, {"a\nbc", 3, 2, 2}, {"a\n", 2, 2, 1}, {"ab", 9, 1, 3}} {
		if l, c := position([]byte(tc.in), tc.i); l != tc.line || c != tc.col {
			t.Errorf("position(%q, %d) = %d:%d, want %d:%d", tc.in, tc.i, l, c, tc.line, tc.col)
		}
	}
}
