package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/fleetrpc/fleet/gateway"
	"github.com/fleetrpc/fleet/internal/demo"
	"github.com/fleetrpc/fleet/protocol"
	"github.com/fleetrpc/fleet/server"
)

// connectTypes are the content types FuzzConnect posts with (by index).
var connectTypes = []string{
	"application/json", "application/proto", "application/connect+json", "application/connect+proto",
	"application/grpc-web", "application/grpc-web+json", "application/grpc-web-text", "application/grpc-web-text+proto",
	"application/grpc+json", "application/foo",
}

// FuzzConnect posts arbitrary paths, bodies and timeouts under each
// Connect and gRPC-Web content type (with Connect-Protocol-Version)
// through Handler (no network), to Go-typed and protobuf unary methods
// and to a protobuf server stream (connecthttp refuses bidi streams over
// HTTP/1.1 before reading). Nothing may panic or hang; a Connect unary
// answer other than 200 has an empty body or a Connect JSON error with a
// code. The seed corpus is in testdata/fuzz/FuzzConnect.
func FuzzConnect(f *testing.F) {
	f.Add(uint8(0), "/Arith/Add", []byte(`{"A":1,"B":2}`), "")
	f.Add(uint8(1), "/Hello/Say", []byte("\x0a\x01a\x10\x01"), "100")
	f.Add(uint8(3), "/Feed/List", []byte("\x00\x00\x00\x00\x02\x10\x03"), "")
	f.Add(uint8(6), "/Hello/Say", []byte("AAAAAAA="), "x")
	f.Add(uint8(4), "/Gen/Upper", []byte("\x00\x00\x00\x00\x01\x0a\x00\x00\x00\x01"), "")
	f.Add(uint8(9), "/Nope/Nope", []byte(`{`), "-1")
	srv := server.New(server.WithLimits(protocol.Limits{MaxDecompressedSize: 4 << 10}))
	if err := srv.Register(demo.Arith{}); err != nil {
		f.Fatal(err)
	}
	if err := srv.Register(&demo.Hello{}); err != nil {
		f.Fatal(err)
	}
	// A server stream: as many messages as the request's field2, up to 5.
	if err := server.HandleServerStream(srv, "Feed", "List", func(ctx context.Context, req *msg, st *server.ServerStream[msg]) error {
		for range min(req.GetField2(), 5) {
			if err := st.Send(req); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		f.Fatal(err)
	}
	defer srv.Close()
	h := gateway.New(srv, gateway.WithMaxJSONDepth(16)).Handler()
	f.Fuzz(func(t *testing.T, ct uint8, path string, body []byte, timeout string) {
		typ := connectTypes[int(ct)%len(connectTypes)]
		r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		r.URL = &url.URL{Path: path}
		r.Header.Set("Content-Type", typ)
		r.Header.Set("Connect-Protocol-Version", "1")
		if timeout != "" {
			r.Header.Set("Connect-Timeout-Ms", timeout)
			r.Header.Set("Grpc-Timeout", timeout)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		out, _ := io.ReadAll(rec.Body)
		if (typ == "application/json" || typ == "application/proto") && rec.Code != http.StatusOK && len(out) > 0 {
			var e struct{ Code string }
			if err := json.Unmarshal(out, &e); err != nil || e.Code == "" {
				t.Fatalf("%s %s %q: status %d, error body %q", typ, path, body, rec.Code, out)
			}
		}
	})
}
