package gateway_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/gateway"
	"github.com/fleetrpc/fleet/protocol"
	"github.com/fleetrpc/fleet/server"
)

type rpcResp struct {
	JSONRPC string          `json:"jsonrpc"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Data    *struct {
			Code   int    `json:"code"`
			Status string `json:"status"`
		} `json:"data"`
	} `json:"error"`
	ID json.RawMessage `json:"id"`
}

func TestJSONRPC(t *testing.T) {
	_, addr := start(t, nil, gateway.WithMaxBatch(10))
	hc := httpClient(t)
	tests := []struct {
		name, body string
		result     string // on success
		code       int    // JSON-RPC error code
		fleetCode  fleet.Code
		id         string
	}{
		{name: "single", body: `{"jsonrpc":"2.0","method":"Arith.Add","params":{"A":1,"B":2},"id":1}`, result: "3", id: "1"},
		{name: "array params", body: `{"jsonrpc":"2.0","method":"Arith.Mul","params":[{"A":3,"B":4}],"id":"x"}`, result: "12", id: `"x"`},
		{name: "no params", body: `{"jsonrpc":"2.0","method":"Arith.Add","id":2}`, result: "0", id: "2"},
		{name: "null id", body: `{"jsonrpc":"2.0","method":"Arith.Add","params":{"A":1},"id":null}`, result: "1", id: "null"},
		{name: "parse error", body: `{"jsonrpc":"2.0",`, code: gateway.ParseError, id: "null"},
		{name: "not an object", body: `42`, code: gateway.InvalidRequest, id: "null"},
		{name: "bad version", body: `{"jsonrpc":"1.0","method":"Arith.Add","id":3}`, code: gateway.InvalidRequest, id: "3"},
		{name: "no method", body: `{"jsonrpc":"2.0","id":4}`, code: gateway.InvalidRequest, id: "4"},
		{name: "bad id", body: `{"jsonrpc":"2.0","method":"Arith.Add","id":{}}`, code: gateway.InvalidRequest, id: "null"},
		{name: "unknown method", body: `{"jsonrpc":"2.0","method":"Arith.Nope","id":5}`, code: gateway.MethodNotFound, id: "5"},
		{name: "no dot", body: `{"jsonrpc":"2.0","method":"Add","id":6}`, code: gateway.MethodNotFound, id: "6"},
		{name: "two params", body: `{"jsonrpc":"2.0","method":"Arith.Add","params":[1,2],"id":7}`, code: gateway.InvalidParams, id: "7"},
		{name: "bad params", body: `{"jsonrpc":"2.0","method":"Arith.Add","params":{"A":"x"},"id":8}`, code: gateway.InvalidParams, fleetCode: fleet.InvalidArgument, id: "8"},
		{name: "handler error", body: `{"jsonrpc":"2.0","method":"Arith.Div","params":{"A":1,"B":0},"id":9}`, code: gateway.ServerError, fleetCode: fleet.Unknown, id: "9"},
		{name: "handler code", body: `{"jsonrpc":"2.0","method":"Probe.Say","params":{"field1":"fail:7","field2":1,"field3":1},"id":10}`, code: gateway.ServerError, fleetCode: fleet.PermissionDenied, id: "10"},
		{name: "empty batch", body: `[]`, code: gateway.InvalidRequest, id: "null"},
		{name: "batch over limit", body: "[" + strings.TrimSuffix(strings.Repeat(`{"jsonrpc":"2.0","method":"Arith.Add","id":1},`, 11), ",") + "]", code: gateway.InvalidRequest, id: "null"},
	}
	for _, path := range []string{"/", "/jsonrpc"} {
		for _, tc := range tests {
			t.Run(path+" "+tc.name, func(t *testing.T) {
				resp, b := post(t, hc, "http://"+addr+path, tc.body, nil)
				if resp.StatusCode != 200 {
					t.Fatalf("status %d: %s", resp.StatusCode, b)
				}
				var r rpcResp
				if err := json.Unmarshal(b, &r); err != nil {
					t.Fatalf("response %s: %v", b, err)
				}
				if r.JSONRPC != "2.0" || string(r.ID) != tc.id {
					t.Fatalf("response %s: want id %s", b, tc.id)
				}
				if tc.code == 0 {
					if r.Error != nil || string(r.Result) != tc.result {
						t.Fatalf("response %s, want result %s", b, tc.result)
					}
					return
				}
				if r.Error == nil || r.Error.Code != tc.code || r.Result != nil {
					t.Fatalf("response %s, want error %d", b, tc.code)
				}
				if tc.fleetCode != 0 && (r.Error.Data == nil || fleet.Code(r.Error.Data.Code) != tc.fleetCode) {
					t.Fatalf("response %s, want fleet code %d", b, tc.fleetCode)
				}
			})
		}
	}

	t.Run("batch", func(t *testing.T) {
		body := `[
			{"jsonrpc":"2.0","method":"Arith.Add","params":{"A":1,"B":2},"id":1},
			{"jsonrpc":"2.0","method":"Arith.Add","params":{"A":5,"B":5}},
			{"jsonrpc":"2.0","method":"Arith.Div","params":{"A":1,"B":0},"id":2},
			1,
			{"jsonrpc":"2.0","method":"Nope.Nope","id":3}
		]`
		resp, b := post(t, hc, "http://"+addr+"/", body, nil)
		var rs []rpcResp
		if err := json.Unmarshal(b, &rs); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%d %s: %v", resp.StatusCode, b, err)
		}
		if len(rs) != 4 {
			t.Fatalf("%d responses, want 4 (the notification gets none): %s", len(rs), b)
		}
		want := []struct {
			id   string
			code int
		}{{"1", 0}, {"2", gateway.ServerError}, {"null", gateway.InvalidRequest}, {"3", gateway.MethodNotFound}}
		for i, w := range want {
			got := 0
			if rs[i].Error != nil {
				got = rs[i].Error.Code
			}
			if string(rs[i].ID) != w.id || got != w.code {
				t.Fatalf("entry %d: %s", i, b)
			}
		}
		if string(rs[0].Result) != "3" {
			t.Fatalf("entry 0: %s", b)
		}
	})
	t.Run("notifications only", func(t *testing.T) {
		for _, body := range []string{
			`{"jsonrpc":"2.0","method":"Arith.Add","params":{"A":1,"B":2}}`,
			`[{"jsonrpc":"2.0","method":"Arith.Add"},{"jsonrpc":"2.0","method":"Nope.Nope"}]`,
		} {
			resp, b := post(t, hc, "http://"+addr+"/", body, nil)
			if resp.StatusCode != 204 || len(b) != 0 {
				t.Fatalf("%s: %d %q", body, resp.StatusCode, b)
			}
		}
	})
	t.Run("huge batch", func(t *testing.T) {
		var sb strings.Builder
		sb.WriteString("[")
		for i := range 100000 {
			if i > 0 {
				sb.WriteString(",")
			}
			fmt.Fprintf(&sb, "%d", i)
		}
		sb.WriteString("]")
		resp, b := post(t, hc, "http://"+addr+"/", sb.String(), nil)
		var r rpcResp
		if err := json.Unmarshal(b, &r); err != nil || r.Error == nil || r.Error.Code != gateway.InvalidRequest || resp.StatusCode != 200 {
			t.Fatalf("%d %s: %v", resp.StatusCode, b, err)
		}
	})
}

// TestJSONRPCBatchReplyBound: a batch whose results pass MaxFrameSize has
// its remaining requests answered resource_exhausted without running.
func TestJSONRPCBatchReplyBound(t *testing.T) {
	_, addr := start(t, []server.Option{server.WithLimits(protocol.Limits{MaxFrameSize: 4 << 10})}, gateway.WithBatchConcurrency(1))
	hc := httpClient(t)
	entry := `{"jsonrpc":"2.0","method":"Plain.Join","params":{"A":"` + strings.Repeat("x", 3000) + `"},"id":%d}`
	var parts []string
	for i := range 4 {
		parts = append(parts, fmt.Sprintf(entry, i))
	}
	resp, b := post(t, hc, "http://"+addr+"/", "["+strings.Join(parts, ",")+"]", nil)
	var rs []rpcResp
	if err := json.Unmarshal(b, &rs); err != nil || resp.StatusCode != 200 || len(rs) != 4 {
		t.Fatalf("%d %.200s: %v", resp.StatusCode, b, err)
	}
	// 3,002 bytes each: the first two fit in 4 KiB's budget (which is
	// checked before each entry), the rest are refused.
	for i, r := range rs {
		refused := r.Error != nil && r.Error.Data != nil && fleet.Code(r.Error.Data.Code) == fleet.ResourceExhausted
		if want := i >= 2; refused != want {
			t.Fatalf("entry %d refused=%v: %.300s", i, refused, b)
		}
	}
}
