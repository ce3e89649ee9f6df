package gateway_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/gateway"
	"github.com/fleetrpc/fleet/internal/demo"
	"github.com/fleetrpc/fleet/protocol"
	"github.com/fleetrpc/fleet/server"
)

// FuzzHTTPJSON posts arbitrary paths, bodies, timeout and metadata
// headers to the HTTP/JSON side through Handler (no network). A success
// must be 200 with a JSON body; every failure must be a JSON error body
// whose Fleet code is not OK and whose status is the one HTTPStatus
// gives for that code (413 for an oversized body). The seed corpus is in
// testdata/fuzz/FuzzHTTPJSON.
func FuzzHTTPJSON(f *testing.F) {
	f.Add("/Arith/Add", []byte(`{"A":1,"B":2}`), "", "k", "v")
	f.Add("/Arith/Div", []byte(`{"A":1,"B":0}`), "1000", "", "")
	f.Add("/Arith/Add", []byte(`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[`), "-1", "a", "b")
	f.Add("/Nope/Nope", []byte(`{`), "x", "", "")
	f.Add("/Arith", []byte(``), "", "", "")
	f.Add("/Arith/Add/x", []byte(`{"A":"1"}`), "", "", "")
	srv := server.New(server.WithLimits(protocol.Limits{MaxDecompressedSize: 4 << 10}))
	if err := srv.Register(demo.Arith{}); err != nil {
		f.Fatal(err)
	}
	defer srv.Close()
	h := gateway.New(srv, gateway.WithMaxJSONDepth(16)).Handler()
	f.Fuzz(func(t *testing.T, path string, body []byte, timeout, mdKey, mdVal string) {
		if path == "/" || path == "/jsonrpc" {
			return // the JSON-RPC endpoint, FuzzJSONRPC's
		}
		r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		r.URL = &url.URL{Path: path}
		r.Header.Set("Content-Type", "application/json")
		if timeout != "" {
			r.Header.Set(gateway.TimeoutHeader, timeout)
		}
		if mdKey != "" {
			r.Header[gateway.MetadataHeaderPrefix+mdKey] = []string{mdVal}
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		out, _ := io.ReadAll(rec.Body)
		if !json.Valid(out) {
			t.Fatalf("%s %q: status %d with a body that is not JSON: %q", path, body, rec.Code, out)
		}
		if rec.Code == http.StatusOK {
			return
		}
		var e struct {
			Code    fleet.Code `json:"code"`
			Status  string     `json:"status"`
			Message string     `json:"message"`
		}
		if err := json.Unmarshal(out, &e); err != nil {
			t.Fatalf("%s %q: status %d, error body %q: %v", path, body, rec.Code, out, err)
		}
		if e.Code == fleet.OK || e.Status == "" || e.Message == "" {
			t.Fatalf("%s %q: status %d, error body without a code: %q", path, body, rec.Code, out)
		}
		if want := gateway.HTTPStatus(e.Code); rec.Code != want && !(rec.Code == http.StatusRequestEntityTooLarge && e.Code == fleet.ResourceExhausted) {
			t.Fatalf("%s %q: status %d for code %v (want %d): %q", path, body, rec.Code, e.Code, want, out)
		}
	})
}
