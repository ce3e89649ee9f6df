package gateway_test

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect/v2"
	"connectrpc.com/connect/v2/connecthttp"
	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/gateway"
	"github.com/fleetrpc/fleet/internal/benchpb"
	"github.com/fleetrpc/fleet/internal/demo"
	"github.com/fleetrpc/fleet/server"
	"google.golang.org/protobuf/proto"
)

// h2cClient returns an HTTP client speaking cleartext HTTP/2 with prior
// knowledge, its connections closed when the test ends.
func h2cClient(t *testing.T) *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}
}

// connectClients are a connect-go client per protocol and codec.
func connectClients(hc *http.Client, addr string) map[string]*connect.Client {
	base := "http://" + addr
	return map[string]*connect.Client{
		"connect+proto": connect.NewClient(connecthttp.NewTransport(hc, base)),
		"connect+json":  connect.NewClient(connecthttp.NewTransport(hc, base, connecthttp.WithProtoJSON())),
		"grpcweb+proto": connect.NewClient(connecthttp.NewTransport(hc, base, connecthttp.WithGRPCWeb())),
		"grpcweb+json":  connect.NewClient(connecthttp.NewTransport(hc, base, connecthttp.WithGRPCWeb(), connecthttp.WithProtoJSON())),
	}
}

func unarySpec(path string) connect.Spec {
	return connect.Spec{Procedure: path, StreamType: connect.StreamTypeUnary}
}

func TestConnectUnary(t *testing.T) {
	_, addr := start(t, nil, gateway.WithProtoPackage("fleet.demo"))
	for name, c := range connectClients(httpClient(t), addr) {
		t.Run(name, func(t *testing.T) {
			for _, path := range []string{"/Hello/Say", "/fleet.demo.Hello/Say"} {
				in, out := benchpb.New(), new(benchpb.BenchmarkMessage)
				if err := c.CallUnary(context.Background(), unarySpec(path), in, out); err != nil {
					t.Fatalf("%s: %v", path, err)
				}
				if err := demo.CheckReply(in, out); err != nil {
					t.Fatalf("%s: %v", path, err)
				}
			}
			for code := fleet.Canceled; code <= fleet.ShuttingDown; code++ {
				in := benchpb.New()
				in.Field1 = proto.String("fail:" + strconv.Itoa(int(code)))
				err := c.CallUnary(context.Background(), unarySpec("/Probe/Say"), in, new(benchpb.BenchmarkMessage))
				var ce *connect.Error
				if !errors.As(err, &ce) || ce.Code() != gateway.ConnectCode(code) || ce.Message() != "failed as asked" {
					t.Fatalf("fleet code %v: got %v", code, err)
				}
			}
			for _, path := range []string{"/Nope/Say", "/Hello/Nope", "/x/y/z"} {
				err := c.CallUnary(context.Background(), unarySpec(path), benchpb.New(), new(benchpb.BenchmarkMessage))
				if connect.CodeOf(err) != connect.CodeUnimplemented {
					t.Fatalf("%s: %v", path, err)
				}
			}
			// Metadata both ways, and the call's deadline.
			ctx, info := connect.NewClientContext(context.Background())
			ctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			info.RequestHeader().Set("k", "v1")
			out := new(benchpb.BenchmarkMessage)
			if err := c.CallUnary(ctx, unarySpec("/Probe/Say"), benchpb.New(), out); err != nil {
				t.Fatal(err)
			}
			if got := info.ResponseHeader().Get("echo"); got != "v1" || info.ResponseHeader().Get("echo-trailer") != "" {
				t.Fatalf("echo header %q", got)
			}
			if got := info.ResponseTrailer().Get("echo-trailer"); got != "v1" || info.ResponseTrailer().Get("echo") != "" {
				t.Fatalf("echo trailer %q", got)
			}
			if out.GetField1() != "deadline" {
				t.Fatalf("handler saw no deadline: %q", out.GetField1())
			}
		})
	}
	if gateway.ConnectCode(fleet.ShuttingDown) != connect.CodeUnavailable || gateway.ConnectCode(fleet.NotFound) != connect.CodeNotFound {
		t.Fatal("code mapping")
	}
}

// TestConnectWire checks the wire forms by hand: Connect JSON for a Go
// type, bad bodies, the line between Connect and HTTP/JSON, GET for a
// method not marked idempotent, and the cross-origin refusal.
func TestConnectWire(t *testing.T) {
	_, addr := start(t, nil)
	hc := httpClient(t)
	url := "http://" + addr
	connectJSON := map[string]string{"Content-Type": "application/json", "Connect-Protocol-Version": "1"}

	resp, body := post(t, hc, url+"/Plain/Join", `{"A":"x","B":"y"}`, connectJSON)
	if resp.StatusCode != 200 || string(body) != `"xy"` || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("Go type over Connect JSON: %d %q", resp.StatusCode, body)
	}
	// The same request without Connect-Protocol-Version is HTTP/JSON,
	// whose errors have a numeric code.
	resp, body = post(t, hc, url+"/Hello/Nope", `{}`, map[string]string{"Content-Type": "application/json"})
	if resp.StatusCode != 404 || !strings.Contains(string(body), `"code":5`) {
		t.Fatalf("HTTP/JSON: %d %s", resp.StatusCode, body)
	}
	cases := []struct {
		name, path, body string
		hdr              map[string]string
		status           int
		code             string
	}{
		{"bad JSON", "/Plain/Join", `{"A":`, connectJSON, 400, "invalid_argument"},
		{"bad proto", "/Hello/Say", "\xff\xff\xff", map[string]string{"Content-Type": "application/proto"}, 400, "invalid_argument"},
		{"deep JSON", "/Plain/Join", strings.Repeat("[", 200), connectJSON, 400, "invalid_argument"},
		{"unknown", "/Nope/Say", `{}`, connectJSON, 404, "unimplemented"},
		{"cross-origin", "/Plain/Join", `{}`, map[string]string{"Content-Type": "application/json", "Connect-Protocol-Version": "1", "Origin": "https://evil.example"}, 403, "permission_denied"},
		{"cross-site", "/Plain/Join", `{}`, map[string]string{"Content-Type": "application/json", "Connect-Protocol-Version": "1", "Sec-Fetch-Site": "cross-site"}, 403, "permission_denied"},
		{"bad timeout", "/Plain/Join", `{}`, map[string]string{"Content-Type": "application/json", "Connect-Protocol-Version": "1", "Connect-Timeout-Ms": "-5"}, 400, "invalid_argument"},
	}
	for _, c := range cases {
		resp, body := post(t, hc, url+c.path, c.body, c.hdr)
		if resp.StatusCode != c.status || !strings.Contains(string(body), `"code":"`+c.code+`"`) {
			t.Errorf("%s: %d %s", c.name, resp.StatusCode, body)
		}
	}
	// GET is for methods a protobuf descriptor marks free of side
	// effects; Hello is not.
	resp, err := hc.Get(url + "/Hello/Say?connect=v1&encoding=json&message=%7B%7D")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET of a method not marked idempotent: %d", resp.StatusCode)
	}
}

func TestConnectCORS(t *testing.T) {
	_, addr := start(t, nil, gateway.WithCORS(gateway.CORS{AllowedOrigins: []string{"https://app.example"}, AllowedHeaders: []string{"K"}, ExposedHeaders: []string{"Echo"}}))
	hc := httpClient(t)
	url := "http://" + addr
	preflight := func(origin string) *http.Response {
		req, _ := http.NewRequest(http.MethodOptions, url+"/Plain/Join", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "connect-protocol-version,content-type,k")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if r := preflight("https://app.example"); r.Header.Get("Access-Control-Allow-Origin") != "https://app.example" {
		t.Fatalf("allowed origin's preflight: %d %v", r.StatusCode, r.Header)
	}
	if r := preflight("https://evil.example"); r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("other origin's preflight: %v", r.Header)
	}
	hdr := map[string]string{"Content-Type": "application/json", "Connect-Protocol-Version": "1", "Origin": "https://app.example", "Sec-Fetch-Site": "cross-site"}
	resp, body := post(t, hc, url+"/Plain/Join", `{"A":"a","B":"b"}`, hdr)
	if resp.StatusCode != 200 || string(body) != `"ab"` || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example" {
		t.Fatalf("allowed origin: %d %s %v", resp.StatusCode, body, resp.Header)
	}
	hdr["Origin"] = "https://evil.example"
	if resp, body := post(t, hc, url+"/Plain/Join", `{}`, hdr); resp.StatusCode != 403 {
		t.Fatalf("other origin: %d %s", resp.StatusCode, body)
	}
	// HTTP/JSON stays same-origin.
	hdr = map[string]string{"Content-Type": "application/json", "Origin": "https://app.example"}
	if resp, body := post(t, hc, url+"/Plain/Join", `{}`, hdr); resp.StatusCode != 403 {
		t.Fatalf("HTTP/JSON from an allowed origin: %d %s", resp.StatusCode, body)
	}
}

func TestConnectAuth(t *testing.T) {
	auth := server.WithAuth(func(_ context.Context, _ *fleet.CallInfo, token string) error {
		if token != "Bearer good" {
			return fleet.NewError(fleet.Unauthenticated, "bad token")
		}
		return nil
	})
	_, addr := start(t, []server.Option{auth})
	hc := httpClient(t)
	url := "http://" + addr
	for _, path := range []string{"/Plain/Join", "/Nope/Say"} {
		resp, body := post(t, hc, url+path, `{"A":"a"}`, map[string]string{"Content-Type": "application/json", "Connect-Protocol-Version": "1"})
		if resp.StatusCode != 401 || !strings.Contains(string(body), "unauthenticated") {
			t.Fatalf("%s without token: %d %s", path, resp.StatusCode, body)
		}
	}
	resp, body := post(t, hc, url+"/Plain/Join", `{"A":"a"}`, map[string]string{"Content-Type": "application/json", "Connect-Protocol-Version": "1", "Authorization": "Bearer good"})
	if resp.StatusCode != 200 || string(body) != `"a"` {
		t.Fatalf("with token: %d %s", resp.StatusCode, body)
	}
}

func TestConnectStreams(t *testing.T) {
	f, addr := streamGatewayWith(t, nil, gateway.WithH2CToHTTP(true))
	list := connect.Spec{Procedure: "/fleet.demo.Feed/List", StreamType: connect.StreamTypeServer}
	for _, hc := range []*http.Client{httpClient(t), h2cClient(t)} {
		for name, c := range connectClients(hc, addr) {
			in := benchpb.New()
			in.Field2 = proto.Int32(3)
			in.Field1 = proto.String("fail:9")
			ctx, info := connect.NewClientContext(context.Background())
			info.RequestHeader().Set("k", "v")
			st, err := c.CallServerStream(ctx, list, in)
			if err != nil {
				t.Fatal(err)
			}
			var n int32
			for {
				out := new(benchpb.BenchmarkMessage)
				err = st.Receive(out)
				if err != nil {
					break
				}
				if out.GetField2() != n {
					t.Fatalf("%s: message %d numbered %d", name, n, out.GetField2())
				}
				n++
			}
			if n != 3 || connect.CodeOf(err) != connect.CodeFailedPrecondition {
				t.Fatalf("%s: %d messages, then %v", name, n, err)
			}
			if got := info.ResponseTrailer().Get("echo"); got != "v" {
				t.Fatalf("%s: trailer echo %q", name, got)
			}
			if got := info.ResponseHeader().Get("head"); got != "v" || info.ResponseTrailer().Get("head") != "" {
				t.Fatalf("%s: header head %q, trailer %v", name, got, info.ResponseTrailer())
			}
			if got := info.ResponseTrailer().Get("late"); got != "v" || info.ResponseHeader().Get("late") != "" {
				t.Fatalf("%s: late key %q in the trailer, header %v", name, got, info.ResponseHeader())
			}
			st.Close()
		}
	}
	// Client and bidi streams need HTTP/2.
	hc := h2cClient(t)
	for name, c := range connectClients(hc, addr) {
		if strings.HasPrefix(name, "grpcweb") {
			continue // gRPC-Web clients stream one way only
		}
		st, err := c.CallClientStream(context.Background(), connect.Spec{Procedure: "/Feed/Sum", StreamType: connect.StreamTypeClient})
		if err != nil {
			t.Fatal(err)
		}
		for i := int32(1); i <= 4; i++ {
			m := benchpb.New()
			m.Field2 = proto.Int32(i)
			if err := st.Send(m); err != nil {
				t.Fatal(err)
			}
		}
		_ = st.CloseSend()
		out := new(benchpb.BenchmarkMessage)
		if err := st.Receive(out); err != nil || out.GetField2() != 10 || out.GetField3() != 4 {
			t.Fatalf("%s: Sum %v %v", name, out, err)
		}
		st.Close()

		bs, err := c.CallClientStream(context.Background(), connect.Spec{Procedure: "/Gen/Upper", StreamType: connect.StreamTypeBidi})
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range []string{"a", "b"} {
			m := benchpb.New()
			m.Field1 = proto.String(w)
			if err := bs.Send(m); err != nil {
				t.Fatal(err)
			}
			out := new(benchpb.BenchmarkMessage)
			if err := bs.Receive(out); err != nil || out.GetField1() != "upper:"+w {
				t.Fatalf("%s: bidi %v %v", name, out, err)
			}
		}
		_ = bs.CloseSend()
		if err := bs.Receive(new(benchpb.BenchmarkMessage)); !errors.Is(err, io.EOF) {
			t.Fatalf("%s: bidi end %v", name, err)
		}
		bs.Close()
	}
	// A bidi stream over HTTP/1.1 is refused with 505.
	resp, _ := post(t, httpClient(t), "http://"+addr+"/Gen/Upper", "", map[string]string{"Content-Type": "application/connect+proto"})
	if resp.StatusCode != http.StatusHTTPVersionNotSupported {
		t.Fatalf("bidi over HTTP/1.1: %d", resp.StatusCode)
	}
	waitFor(t, "handlers to return", func() bool { return f.running.Load() == 0 })
}

// grpcWebFrames posts one message to path as gRPC-Web text and returns
// the messages and the trailer block of the answer.
func grpcWebText(t *testing.T, hc *http.Client, url string, in proto.Message) (msgs [][]byte, trailer string) {
	t.Helper()
	b, _ := proto.Marshal(in)
	frame := append([]byte{0, byte(len(b) >> 24), byte(len(b) >> 16), byte(len(b) >> 8), byte(len(b))}, b...)
	resp, body := post(t, hc, url, base64.StdEncoding.EncodeToString(frame), map[string]string{"Content-Type": "application/grpc-web-text+proto"})
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/grpc-web-text") {
		t.Fatalf("%s: %d %v", url, resp.StatusCode, resp.Header)
	}
	// Each flush is its own padded chunk: decode quantum by quantum.
	var raw []byte
	for i := 0; i+4 <= len(body); i += 4 {
		q, err := base64.StdEncoding.DecodeString(string(body[i : i+4]))
		if err != nil {
			t.Fatalf("%s: body %q: %v", url, body, err)
		}
		raw = append(raw, q...)
	}
	for len(raw) >= 5 {
		n := int(raw[1])<<24 | int(raw[2])<<16 | int(raw[3])<<8 | int(raw[4])
		if raw[0]&0x80 != 0 {
			trailer = string(raw[5 : 5+n])
		} else {
			msgs = append(msgs, raw[5:5+n])
		}
		raw = raw[5+n:]
	}
	return msgs, trailer
}

func TestGRPCWebText(t *testing.T) {
	_, addr := streamGatewayWith(t, nil)
	hc := httpClient(t)
	in := benchpb.New()
	msgs, tr := grpcWebText(t, hc, "http://"+addr+"/fleet.demo.Hello/Say", in)
	out := new(benchpb.BenchmarkMessage)
	if len(msgs) != 1 || proto.Unmarshal(msgs[0], out) != nil || demo.CheckReply(in, out) != nil || !strings.Contains(tr, "grpc-status: 0") {
		t.Fatalf("unary: %d messages, trailer %q", len(msgs), tr)
	}
	in.Field2 = proto.Int32(3)
	msgs, tr = grpcWebText(t, hc, "http://"+addr+"/Feed/List", in)
	if len(msgs) != 3 || !strings.Contains(tr, "grpc-status: 0") {
		t.Fatalf("server stream: %d messages, trailer %q", len(msgs), tr)
	}
}

// TestConnectSlowHandler: a unary handler that runs longer than the body
// and write timeouts is answered: the body timeout ends when the body has
// been read, the write timeout starts with the answer.
func TestConnectSlowHandler(t *testing.T) {
	srv := server.New(server.WithLogger(discard()))
	if err := server.Handle(srv, "Slow", "Do", func(ctx context.Context, in *string, out *string) error {
		time.Sleep(300 * time.Millisecond)
		*out = *in
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	g := gateway.New(srv, gateway.WithLogger(discard()), gateway.WithBodyTimeout(100*time.Millisecond), gateway.WithWriteTimeout(100*time.Millisecond), gateway.WithH2CToHTTP(true))
	addr := serveGateway(t, g)
	for _, hc := range []*http.Client{httpClient(t), h2cClient(t)} {
		resp, body := post(t, hc, "http://"+addr+"/Slow/Do", `"x"`, map[string]string{"Content-Type": "application/json", "Connect-Protocol-Version": "1"})
		if resp.StatusCode != 200 || string(body) != `"x"` {
			t.Fatalf("%s: %d %s", resp.Proto, resp.StatusCode, body)
		}
	}
}

// contentTypeRewriter sends every request as the conformance suite's
// "unexpected-content-type" case does: Content-Type image/jpeg and no
// Connect-Protocol-Version header.
type contentTypeRewriter struct{ next http.RoundTripper }

func (c contentTypeRewriter) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Content-Type", "image/jpeg")
	r.Header.Del("Connect-Protocol-Version")
	return c.next.RoundTrip(r)
}

// TestUnexpectedContentType checks the answer to a POST whose content
// type is neither JSON nor an RPC protocol's: 415, an Accept-Post header
// listing what the path takes, and a text/plain body, which Connect and
// gRPC-Web clients (connect-go) read as code unknown and JSON requests
// never get (their errors keep Fleet's JSON body).
func TestUnexpectedContentType(t *testing.T) {
	_, addr := start(t, nil)
	hc := httpClient(t)
	rc := &http.Client{Transport: contentTypeRewriter{next: hc.Transport}, Timeout: hc.Timeout}
	for name, c := range connectClients(rc, addr) {
		t.Run(name, func(t *testing.T) {
			err := c.CallUnary(context.Background(), unarySpec("/Hello/Say"), benchpb.New(), new(benchpb.BenchmarkMessage))
			var ce *connect.Error
			if !errors.As(err, &ce) || ce.Code() != connect.CodeUnknown || !strings.Contains(ce.Message(), "415") {
				t.Fatalf("got %v, want unknown from HTTP status 415", err)
			}
		})
	}
	for _, c := range []struct{ path, ct, accept string }{
		{"/Hello/Say", "image/jpeg", "application/proto"},
		{"/Hello/Say", "text/plain", "application/grpc-web+proto"},
		{"/Hello/Say", "", "application/json"},
		{"/", "image/jpeg", "application/json"},
		{"/jsonrpc", "application/x-www-form-urlencoded", "application/json"},
	} {
		t.Run(c.path+" "+c.ct, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, "http://"+addr+c.path, strings.NewReader("12345678"))
			if c.ct != "" {
				req.Header.Set("Content-Type", c.ct)
			}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			ap := resp.Header.Get("Accept-Post")
			if resp.StatusCode != http.StatusUnsupportedMediaType || !strings.Contains(ap, c.accept) ||
				resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" || !strings.Contains(string(b), strconv.Quote(c.ct)) {
				t.Fatalf("%d, Accept-Post %q, Content-Type %q, body %q", resp.StatusCode, ap, resp.Header.Get("Content-Type"), b)
			}
			if c.path != "/Hello/Say" && ap != "application/json" {
				t.Fatalf("JSON-RPC Accept-Post %q", ap)
			}
		})
	}
	// A JSON request's error keeps Fleet's JSON body.
	resp, b := post(t, hc, "http://"+addr+"/Nope/Say", `{}`, nil)
	if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Content-Type") != "application/json" || !strings.Contains(string(b), `"code":5`) {
		t.Fatalf("JSON error: %d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
}
