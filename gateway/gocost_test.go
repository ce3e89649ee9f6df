package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// GTWide is a struct of many fields: an empty element of a []GTWide is 2
// wire bytes but a dynamicpb message, a Go struct and a JSON object of
// 40 members once decoded.
type GTWide struct {
	F01, F02, F03, F04, F05, F06, F07, F08, F09, F10 int64
	S01, S02, S03, S04, S05, S06, S07, S08, S09, S10 string
	B01, B02, B03, B04, B05, B06, B07, B08, B09, B10 bool
	D01, D02, D03, D04, D05, D06, D07, D08, D09, D10 float64
}

// GTWideList is the argument of the decode-cost tests' methods: field 1
// Name, 2 Items, 3 Ptrs, 4 ByID, 5 Nums.
type GTWideList struct {
	Name  string
	Items []GTWide
	Ptrs  []*GTWide
	ByID  map[int32]GTWide
	Nums  []int
}

// repeatField returns n occurrences of field num (bytes) with value v.
func repeatField(num protowire.Number, v []byte, n int) []byte {
	one := protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), v)
	return bytes.Repeat(one, n)
}

// packedZeros returns field num holding n packed varint zeros.
func packedZeros(num protowire.Number, n int) []byte {
	return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), make([]byte, n))
}

// decodeAllocs returns the bytes allocated by decoding b as g's message
// and encoding the value as JSON, as handleGRPC does.
func decodeAllocs(t *testing.T, g *goMessage, b []byte) uint64 {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	v, err := g.decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := json.Marshal(v); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestDecodeCostEstimate compares checkDecodeCost's estimate with what
// decoding (dynamicpb, the Go value, its JSON) really allocates, for the
// adversarial shapes and ordinary ones: the estimate is at least the
// allocations, within a margin of 50% (the race detector's runtime
// allocates about 10% more than the estimate's figures, measured
// without it). It errs high where protobuf-go merges (duplicate map
// keys), which the log shows.
func TestDecodeCostEstimate(t *testing.T) {
	wide, err := goMessageOf(reflect.TypeFor[GTWideList]())
	if err != nil {
		t.Fatal(err)
	}
	all, err := goMessageOf(reflect.TypeFor[GTAll]())
	if err != nil {
		t.Fatal(err)
	}
	strs, err := goMessageOf(reflect.TypeFor[[]string]())
	if err != nil {
		t.Fatal(err)
	}
	const n = 20000
	var entries, idEntries []byte
	for i := range n {
		e := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), fmt.Appendf(nil, "key%d", i))
		entries = protowire.AppendBytes(protowire.AppendTag(entries, 21, protowire.BytesType), e)
		e = protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), uint64(i))
		idEntries = protowire.AppendBytes(protowire.AppendTag(idEntries, 22, protowire.BytesType), e)
	}
	for _, c := range []struct {
		name string
		g    *goMessage
		body []byte
	}{
		{"wide empty elements", wide, repeatField(2, nil, n)},
		{"wide empty pointer elements", wide, repeatField(3, nil, n)},
		{"wide empty map entries", wide, repeatField(4, nil, n)},
		{"all empty elements", all, repeatField(19, nil, n)},
		{"all message map entries", all, idEntries},
		{"all string map entries", all, entries},
		{"packed zeros", all, packedZeros(12, 10*n)},
		{"strings", strs, repeatField(1, []byte("abcdefgh"), n)},
		{"escaped string", strs, repeatField(1, bytes.Repeat([]byte("<"), 10*n), 1)},
		{"unknown fields", all, repeatField(100, []byte("x"), n)},
	} {
		est := costScan{g: c.g, limit: 1 << 40, maxDepth: 100}
		if err := est.message(c.body, c.g.md, 1); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got := decodeAllocs(t, c.g, c.body)
		t.Logf("%s: %d wire bytes, estimate %d, allocated %d (%.2f)", c.name, len(c.body), est.cost, got, float64(est.cost)/float64(got))
		if float64(est.cost)*1.5 < float64(got) {
			t.Errorf("%s: estimate %d is below the %d bytes allocated", c.name, est.cost, got)
		}
	}
}

// BenchmarkDecodeCost compares the pre-scan (checkDecodeCost) with the
// decoding it guards (decode: dynamicpb, then the Go value), on an
// ordinary request of GTAll with every field set and 100 list elements.
func BenchmarkDecodeCost(b *testing.B) {
	all, err := goMessageOf(reflect.TypeFor[GTAll]())
	if err != nil {
		b.Fatal(err)
	}
	v := &GTAll{Name: "name", Small: -3, U8: 200, Big: 1 << 40, F64: 1.5, On: true, Raw: []byte("raw"),
		Tags: []string{"a", "b"}, Nums: make([]int, 100), Inner: GTInner{1, 2}, Ptr: &GTInner{3, 4},
		List: make([]GTInner, 100), Count: map[string]int{"a": 1, "b": 2}, ByID: map[int32]*GTInner{7: {5, 6}}}
	body, err := all.encode(v)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("scan", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if err := all.checkDecodeCost(body, 32<<20, 100); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if _, err := all.decode(body); err != nil {
				b.Fatal(err)
			}
		}
	})
}
