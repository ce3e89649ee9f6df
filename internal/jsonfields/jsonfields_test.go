package jsonfields_test

import (
	"testing"

	"github.com/fleetrpc/fleet/internal/jsonfields"
)

// schema and zero are what server/reflection gives for
//
//	type Order struct {
//		ID    string `json:"id"`
//		Items []Item `json:"items"`
//		Note  string `json:"note,omitempty"`
//		Ptr   *int   `json:"ptr"`
//		Sub   Sub    `json:"sub"`
//	}
//	type Item struct{ SKU string `json:"sku"`; Qty int `json:"qty"` }
//	type Sub struct{ N int }
const (
	schema = `{"type":"object","properties":{"id":{"type":"string"},"items":{"type":["array","null"],"items":{"type":"object","properties":{"sku":{"type":"string"},"qty":{"type":"integer"}}}},"note":{"type":"string"},"ptr":{"type":["integer","null"]},"sub":{"type":"object","properties":{"N":{"type":"integer"}}}}}`
	zero   = `{"id":"","items":null,"ptr":null,"sub":{"N":0}}`
)

func TestCheck(t *testing.T) {
	c := jsonfields.New([]byte(schema), []byte(zero))
	for _, tc := range []struct {
		in, want string
	}{
		{`{"id":"a","sub":{"N":1}}`, ""},
		{`{"ID":"a","Sub":{"n":1}}`, ""},
		{`{"id":"a","sub":{"N":1},"items":[{"sku":"x","qty":1}],"note":"n","ptr":3}`, ""},
		{`{"id":"a","sub":{"N":1},"idd":1}`, `unknown field "idd" in the argument (did you mean "id"? its fields: id, items, note, ptr, sub)`},
		{`{"sub":{"N":1}}`, `missing field "id" in the argument (give its zero value, "")`},
		{`{"id":"a","sub":{}}`, `missing field "N" in sub (give its zero value, 0)`},
		{`{"id":"a","sub":{"N":1},"items":[{"sku":"x"},{"sku":"y","qtyy":2}]}`, `unknown field "qtyy" in items[1] (did you mean "qty"? its fields: sku, qty)`},
		{`not json`, ""},
		{`[1,2]`, ""},
	} {
		got := ""
		if fe := c.Check([]byte(tc.in)); fe != nil {
			got = fe.Error()
		}
		if got != tc.want {
			t.Errorf("Check(%s) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if jsonfields.New(nil, nil).Check([]byte(`{"x":1}`)) != nil {
		t.Error("a nil Checker refused something")
	}
}

func TestNearest(t *testing.T) {
	names := []string{"Add", "Mul", "Divide"}
	for in, want := range map[string]string{"add": "Add", "Ad": "Add", "Mull": "Mul", "Dvide": "Divide", "Sqrt": ""} {
		if got := jsonfields.Nearest(in, names); got != want {
			t.Errorf("Nearest(%q) = %q, want %q", in, got, want)
		}
	}
}

// BenchmarkCheck is the cost the strict field check adds to an HTTP/JSON
// call of the Order type above, on top of decoding.
func BenchmarkCheck(b *testing.B) {
	c := jsonfields.New([]byte(schema), []byte(zero))
	in := []byte(`{"id":"a","sub":{"N":1},"items":[{"sku":"x","qty":1},{"sku":"y","qty":2}],"note":"n"}`)
	b.ReportAllocs()
	for b.Loop() {
		if c.Check(in) != nil {
			b.Fatal("refused")
		}
	}
}
