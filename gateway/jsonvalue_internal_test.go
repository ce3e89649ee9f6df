package gateway

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestParamsPayload checks the JSON-RPC params forms a Fleet method takes:
// an object, an array of one element (of any kind), nothing; and refuses
// arrays of more elements without decoding them.
func TestParamsPayload(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"A":1}`, `{"A":1}`},
		{`[{"A":1}]`, `{"A":1}`},
		{`[ {"A":[1,2]} ]`, `{"A":[1,2]}`},
		{`[1]`, `1`},
		{`[ 12 ]`, `12`},
		{`["a]b"]`, `"a]b"`},
		{`["a\"]"]`, `"a\"]"`},
		{`[[{},{}]]`, `[{},{}]`},
		{`[null]`, `null`},
		{`[]`, ``},
		{``, ``},
	} {
		got, err := paramsPayload([]byte(tc.in))
		if err != nil || string(got) != tc.want {
			t.Errorf("paramsPayload(%s) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{`[1,2]`, `[{}, {}]`, `["a",1]`, `3`, `"s"`} {
		if _, err := paramsPayload([]byte(in)); err == nil {
			t.Errorf("paramsPayload(%s): no error, want one", in)
		}
	}
}

// TestParseRequest checks that parseRequest reads a request object as
// json.Unmarshal does, without copying it.
func TestParseRequest(t *testing.T) {
	for _, in := range []string{
		`{"jsonrpc":"2.0","method":"Arith.Add","params":{"A":1,"B":[1,2]},"id":1}`,
		` { "id" : "x" , "Method" : "a.b" , "params" : [ {"k":"v,}"} ] , "jsonrpc" : "2.0" } `,
		`{"id":null,"method":"m","method":"n"}`,
		`{"\u006dethod":"a.b","params":3,"x":{"y":[{}]},"id":-1.5e3}`,
		`{}`,
	} {
		var got, want rpcRequest
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatal(err)
		}
		if err := parseRequest([]byte(in), &got); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		for _, f := range [][2]json.RawMessage{{got.JSONRPC, want.JSONRPC}, {got.Method, want.Method}, {got.Params, want.Params}, {got.ID, want.ID}} {
			if !bytes.Equal(f[0], f[1]) || (f[0] == nil) != (f[1] == nil) {
				t.Errorf("%s: got %q, want %q", in, f[0], f[1])
			}
		}
	}
	for _, in := range []string{`[]`, `"s"`, `3`} {
		if parseRequest([]byte(in), new(rpcRequest)) == nil {
			t.Errorf("%s: no error", in)
		}
	}
}
