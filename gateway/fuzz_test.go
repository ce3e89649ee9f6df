package gateway_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/fleetrpc/fleet/gateway"
	"github.com/fleetrpc/fleet/internal/demo"
	"github.com/fleetrpc/fleet/protocol"
	"github.com/fleetrpc/fleet/server"
)

// FuzzJSONRPC posts arbitrary bodies to the JSON-RPC 2.0 endpoint through
// Handler (no network): the answer must be 204 with no body, or a JSON
// response object or array, never a panic.
func FuzzJSONRPC(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","method":"Arith.Add","params":{"A":1,"B":2},"id":1}`,
		`[{"jsonrpc":"2.0","method":"Arith.Add","params":[{"A":1}],"id":"a"},{"jsonrpc":"2.0","method":"Arith.Div","params":{"A":1,"B":0}}]`,
		`{"jsonrpc":"2.0","method":"Arith.Div","params":{"A":1,"B":0},"id":null}`,
		`[]`, `[1,2]`, `{`, `"x"`, `{"jsonrpc":"2.0","method":"Nope.Nope","id":[1]}`,
	} {
		f.Add([]byte(s))
	}
	srv := server.New(server.WithLimits(protocol.Limits{MaxDecompressedSize: 64 << 10}))
	if err := srv.Register(demo.Arith{}); err != nil {
		f.Fatal(err)
	}
	defer srv.Close()
	h := gateway.New(srv, gateway.WithMaxBatch(50)).Handler()
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusNoContent:
			if rec.Body.Len() != 0 {
				t.Fatalf("204 with a body %q", rec.Body.Bytes())
			}
		case http.StatusOK, http.StatusRequestEntityTooLarge:
			out := bytes.TrimSpace(rec.Body.Bytes())
			if !json.Valid(out) || (out[0] != '{' && out[0] != '[') {
				t.Fatalf("body %q answered with %q", body, out)
			}
		default:
			t.Fatalf("body %q answered with status %d", body, rec.Code)
		}
	})
}
