package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/gateway"
	"github.com/fleetrpc/fleet/internal/benchpb"
	"github.com/fleetrpc/fleet/internal/demo"
	"github.com/fleetrpc/fleet/protocol"
	"github.com/fleetrpc/fleet/server"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Probe is a protobuf service that reports what its handler saw.
type Probe struct{}

// Say echoes metadata "k" into response metadata "echo" and response
// trailer "echo-trailer", fails with the
// code named by field1 "fail:<code>", waits for the end of its context
// when field1 is "wait", and sets field1 to "deadline" when
// the call has a deadline.
func (Probe) Say(ctx context.Context, in *benchpb.BenchmarkMessage, out *benchpb.BenchmarkMessage) error {
	if v := fleet.IncomingMetadata(ctx)["k"]; v != "" {
		fleet.SetResponseMetadata(ctx, "echo", v)
		fleet.SetResponseTrailer(ctx, "echo-trailer", v)
	}
	if in.GetField1() == "wait" {
		<-ctx.Done()
		return ctx.Err()
	}
	if s, ok := strings.CutPrefix(in.GetField1(), "fail:"); ok {
		var c int
		for _, r := range s {
			c = c*10 + int(r-'0')
		}
		return fleet.NewError(fleet.Code(c), "failed as asked")
	}
	benchpb.Echo(out, in)
	if _, ok := ctx.Deadline(); ok {
		out.Field1 = proto.String("deadline")
	}
	return nil
}

// Plain is a Go-struct service.
type Plain struct{}

type Pair struct{ A, B string }

// Join returns A+B, and echoes metadata "k" as response metadata "echo".
func (Plain) Join(ctx context.Context, in *Pair, out *string) error {
	if v := fleet.IncomingMetadata(ctx)["k"]; v != "" {
		fleet.SetResponseMetadata(ctx, "echo", v)
	}
	if in.A == "deadline" {
		if _, ok := ctx.Deadline(); ok {
			*out = "has deadline"
			return nil
		}
	}
	*out = in.A + in.B
	return nil
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startManual serves a gateway for a server with Arith, Hello, Probe and
// Plain on 127.0.0.1; the caller shuts it down. done yields Serve's error.
func startManual(t *testing.T, sopts []server.Option, gopts ...gateway.Option) (*gateway.Gateway, string, chan error) {
	t.Helper()
	srv := server.New(append([]server.Option{server.WithLogger(discard())}, sopts...)...)
	for _, r := range []any{demo.Arith{}, &demo.Hello{}, Probe{}, Plain{}} {
		if err := srv.Register(r); err != nil {
			t.Fatal(err)
		}
	}
	g := gateway.New(srv, append([]gateway.Option{gateway.WithLogger(discard())}, gopts...)...)
	addr, done := listenServe(t, g)
	return g, addr, done
}

// listenServe serves g on a new 127.0.0.1 listener; done yields Serve's
// error.
func listenServe(t testing.TB, g *gateway.Gateway) (string, chan error) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- g.Serve(lis) }()
	return lis.Addr().String(), done
}

// serveGateway serves g on 127.0.0.1 until the test ends, then closes it
// and waits for Serve to return.
func serveGateway(t testing.TB, g *gateway.Gateway) string {
	t.Helper()
	addr, done := listenServe(t, g)
	t.Cleanup(func() {
		g.Close()
		<-done
	})
	return addr
}

// start is startManual with a shutdown when the test ends.
func start(t *testing.T, sopts []server.Option, gopts ...gateway.Option) (*gateway.Gateway, string) {
	t.Helper()
	g, addr, done := startManual(t, sopts, gopts...)
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
	return g, addr
}

// httpClient returns an HTTP/1.1 client whose connections close when the
// test ends.
func httpClient(t *testing.T) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}
}

func TestNativeThroughGateway(t *testing.T) {
	_, addr := start(t, nil)
	c, err := client.Dial(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 20 {
		var sum int
		if err := c.Call(context.Background(), "Arith", "Add", &demo.Args{A: i, B: 2}, &sum); err != nil || sum != i+2 {
			t.Fatalf("Add: %d, %v", sum, err)
		}
	}
	var out benchpb.BenchmarkMessage
	if err := c.Call(context.Background(), "Hello", "Say", benchpb.New(), &out); err != nil || demo.CheckReply(benchpb.New(), &out) != nil {
		t.Fatalf("Say: %v", err)
	}
}

func post(t *testing.T, hc *http.Client, url, body string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

type errBody struct {
	Code    int    `json:"code"`
	Status  string `json:"status"`
	Message string `json:"message"`
}

func TestHTTPJSON(t *testing.T) {
	_, addr := start(t, []server.Option{server.WithLimits(protocol.Limits{MaxDecompressedSize: 64 << 10})})
	hc := httpClient(t)
	base := "http://" + addr
	tests := []struct {
		name, path, body string
		hdr              map[string]string
		status           int
		reply            string // exact reply on 200
		code             fleet.Code
		msg              string
	}{
		{name: "add", path: "/Arith/Add", body: `{"A":1,"B":2}`, status: 200, reply: "3"},
		{name: "empty body", path: "/Arith/Add", body: ``, status: 200, reply: "0"},
		{name: "struct reply", path: "/Plain/Join", body: `{"A":"x","B":"y"}`, status: 200, reply: `"xy"`},
		{name: "deadline header", path: "/Plain/Join", body: `{"A":"deadline","B":""}`, hdr: map[string]string{gateway.TimeoutHeader: "60000"}, status: 200, reply: `"has deadline"`},
		{name: "bad timeout", path: "/Plain/Join", body: `{}`, hdr: map[string]string{gateway.TimeoutHeader: "soon"}, status: 400, code: fleet.InvalidArgument},
		{name: "deadline exceeded", path: "/Probe/Say", body: `{"field1":"wait","field2":1,"field3":1}`, hdr: map[string]string{gateway.TimeoutHeader: "50"}, status: 504, code: fleet.DeadlineExceeded},
		{name: "handler error", path: "/Arith/Div", body: `{"A":1,"B":0}`, status: 500, code: fleet.Unknown, msg: "divide by zero"},
		{name: "handler code", path: "/Probe/Say", body: `{"field1":"fail:9","field2":1,"field3":1}`, status: 400, code: fleet.FailedPrecondition, msg: "failed as asked"},
		{name: "unknown service", path: "/Nope/Add", body: `{}`, status: 404, code: fleet.NotFound},
		{name: "unknown method", path: "/Arith/Nope", body: `{}`, status: 404, code: fleet.NotFound},
		{name: "bad path", path: "/Arith", body: `{}`, status: 404, code: fleet.NotFound},
		{name: "malformed JSON", path: "/Arith/Add", body: `{"A":`, status: 400, code: fleet.InvalidArgument},
		{name: "wrong type", path: "/Arith/Add", body: `{"A":"one"}`, status: 400, code: fleet.InvalidArgument},
		{name: "too deep", path: "/Arith/Add", body: strings.Repeat("[", 200) + strings.Repeat("]", 200), status: 400, code: fleet.InvalidArgument, msg: "deeper"},
		{name: "oversized", path: "/Arith/Add", body: `{"A":1,"B":2,"C":"` + strings.Repeat("x", 70<<10) + `"}`, status: 413, code: fleet.ResourceExhausted},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, b := post(t, hc, base+tc.path, tc.body, tc.hdr)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d; body %s", resp.StatusCode, tc.status, b)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Fatalf("Content-Type %q", ct)
			}
			if tc.status == 200 {
				if string(b) != tc.reply {
					t.Fatalf("reply %s, want %s", b, tc.reply)
				}
				return
			}
			var e errBody
			if err := json.Unmarshal(b, &e); err != nil {
				t.Fatalf("error body %s: %v", b, err)
			}
			if fleet.Code(e.Code) != tc.code || e.Status != tc.code.String() || !strings.Contains(e.Message, tc.msg) {
				t.Fatalf("error %+v, want code %v with %q", e, tc.code, tc.msg)
			}
		})
	}

	t.Run("protojson", func(t *testing.T) {
		resp, b := post(t, hc, base+"/Hello/Say", `{"field1":"hi","field2":1,"field3":7,"field9":"nine"}`, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, b)
		}
		var out map[string]any
		if err := json.Unmarshal(b, &out); err != nil || out["field1"] != "OK" || out["field3"] != float64(7) || out["field9"] != "nine" {
			t.Fatalf("reply %s (%v)", b, err)
		}
	})
	t.Run("metadata", func(t *testing.T) {
		resp, b := post(t, hc, base+"/Plain/Join", `{"A":"a","B":""}`, map[string]string{gateway.MetadataHeaderPrefix + "K": "v1"})
		if resp.StatusCode != 200 || resp.Header.Get(gateway.MetadataHeaderPrefix+"Echo") != "v1" {
			t.Fatalf("status %d, headers %v, body %s", resp.StatusCode, resp.Header, b)
		}
	})
	t.Run("GET", func(t *testing.T) {
		resp, err := hc.Get(base + "/Arith/Add")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 405 || resp.Header.Get("Allow") != "POST" || !bytes.Contains(b, []byte(`"code":12`)) {
			t.Fatalf("status %d, body %s", resp.StatusCode, b)
		}
	})
}

func TestHTTPJSONAuth(t *testing.T) {
	auth := server.WithAuth(func(ctx context.Context, info *fleet.CallInfo, token string) error {
		if token != "Bearer secret" {
			return errors.New("who are you")
		}
		return nil
	})
	_, addr := start(t, []server.Option{auth})
	hc := httpClient(t)
	resp, b := post(t, hc, "http://"+addr+"/Arith/Add", `{"A":1,"B":2}`, nil)
	if resp.StatusCode != 401 || !bytes.Contains(b, []byte("who are you")) {
		t.Fatalf("without token: %d %s", resp.StatusCode, b)
	}
	resp, b = post(t, hc, "http://"+addr+"/Arith/Add", `{"A":1,"B":2}`, map[string]string{"Authorization": "Bearer secret"})
	if resp.StatusCode != 200 || string(b) != "3" {
		t.Fatalf("with token: %d %s", resp.StatusCode, b)
	}
}
