package gateway_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/gateway"
	"github.com/fleetrpc/fleet/server"
)

// Order and Line are a nested Go argument for the strict-field tests.
type Order struct {
	ID    string   `json:"id"`
	Lines []Line   `json:"lines"`
	Note  string   `json:"note,omitempty"`
	Ref   *string  `json:"ref"`
	Tags  []string `json:"tags"`
}

type Line struct {
	SKU string `json:"sku"`
	Qty int    `json:"qty"`
}

// Shop serves Order.
type Shop struct{}

func (Shop) Count(in *Order, out *int) error {
	for _, l := range in.Lines {
		*out += l.Qty
	}
	return nil
}

// TestHTTPJSONStrictFields: the HTTP/JSON route refuses, for Go-typed
// arguments, unknown keys and missing fields with 400 and
// invalid_argument naming the field (and where it is), as fleet call
// does; omitempty fields and pointers may be left out, keys match as
// encoding/json matches them, an empty body is the zero value, and
// protobuf arguments keep protojson's rules. WithLooseJSON(true) accepts
// what encoding/json accepts.
func TestHTTPJSONStrictFields(t *testing.T) {
	_, addr := start(t, nil)
	srv := server.New(server.WithLogger(discard()))
	if err := srv.Register(Shop{}); err != nil {
		t.Fatal(err)
	}
	shop := serveGateway(t, gateway.New(srv, gateway.WithLogger(discard())))
	looseSrv := server.New(server.WithLogger(discard()))
	if err := looseSrv.Register(Shop{}); err != nil {
		t.Fatal(err)
	}
	loose := serveGateway(t, gateway.New(looseSrv, gateway.WithLogger(discard()), gateway.WithLooseJSON(true)))
	hc := httpClient(t)
	tests := []struct {
		name, base, path, body string
		status                 int
		reply, msg             string
	}{
		{"complete", addr, "/Arith/Add", `{"A":1,"B":2}`, 200, "3", ""},
		{"keys ignoring case", addr, "/Arith/Add", `{"a":1,"b":2}`, 200, "3", ""},
		{"empty body", addr, "/Arith/Add", ``, 200, "0", ""},
		{"unknown key", addr, "/Arith/Add", `{"A":1,"Bb":2}`, 400, "", `unknown field "Bb" in the argument (did you mean "B"? its fields: A, B)`},
		{"missing field", addr, "/Arith/Add", `{"A":1}`, 400, "", `missing field "B" in the argument (give its zero value, 0)`},
		{"nested unknown", shop, "/Shop/Count", `{"id":"o","lines":[{"sku":"a","qty":1,"qtty":2}],"ref":null,"tags":[]}`, 400, "", `unknown field "qtty" in lines[0]`},
		{"nested complete, optional left out", shop, "/Shop/Count", `{"id":"o","lines":[{"sku":"a","qty":1},{"sku":"b","qty":2}],"tags":null}`, 200, "3", ""},
		{"missing string", shop, "/Shop/Count", `{"lines":[]}`, 400, "", `missing field "id" in the argument (give its zero value, "")`},
		{"protobuf unknown", addr, "/Hello/Say", `{"field1":"x","field2":1,"field3":1,"nope":1}`, 400, "", "nope"},
		{"loose unknown and missing", loose, "/Shop/Count", `{"lines":[{"qty":4,"x":1}],"y":2}`, 200, "4", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, b := post(t, hc, "http://"+tc.base+tc.path, tc.body, nil)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d; body %s", resp.StatusCode, tc.status, b)
			}
			if tc.status == 200 {
				if string(b) != tc.reply {
					t.Fatalf("reply %s, want %s", b, tc.reply)
				}
				return
			}
			var e struct {
				Code    fleet.Code `json:"code"`
				Status  string     `json:"status"`
				Message string     `json:"message"`
			}
			if err := json.Unmarshal(b, &e); err != nil || e.Code != fleet.InvalidArgument || e.Status != "invalid_argument" || !strings.Contains(e.Message, tc.msg) {
				t.Fatalf("error body %s (%v); want invalid_argument with %q", b, err, tc.msg)
			}
		})
	}
}
