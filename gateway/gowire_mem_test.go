package gateway

import (
	"bytes"
	"fmt"
	"reflect"
	"runtime"
	"runtime/metrics"
	"testing"

	"github.com/fleetrpc/fleet"
	"google.golang.org/protobuf/encoding/protowire"
)

// heapAllocs returns the bytes the process has allocated on the heap so
// far (runtime/metrics, /gc/heap/allocs:bytes).
func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
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

// allocShapes are requests whose few wire bytes stand for a large Go
// value, and ordinary ones, each with n elements.
func allocShapes(t testing.TB, n int) []struct {
	name string
	m    *goMessage
	body []byte
} {
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
	arr, err := goMessageOf(reflect.TypeFor[GTArr]())
	if err != nil {
		t.Fatal(err)
	}
	var entries, idEntries []byte
	for i := range n {
		e := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), fmt.Appendf(nil, "key%d", i))
		entries = protowire.AppendBytes(protowire.AppendTag(entries, 21, protowire.BytesType), e)
		e = protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), uint64(i))
		idEntries = protowire.AppendBytes(protowire.AppendTag(idEntries, 22, protowire.BytesType), e)
	}
	one, err := all.encode(&GTAll{Name: "name", Tags: []string{"a", "b"}, Nums: []int{1, 2, 3}, Ptr: &GTInner{X: 1},
		List: []GTInner{{X: 1}}, PList: []*GTInner{{Y: 1}}, Count: map[string]int{"a": 1}, ByID: map[int32]*GTInner{1: {}}})
	if err != nil {
		t.Fatal(err)
	}
	return []struct {
		name string
		m    *goMessage
		body []byte
	}{
		{"wide empty elements", wide, repeatField(2, nil, n)},
		{"wide empty pointer elements", wide, repeatField(3, nil, n)},
		{"wide empty map entries", wide, repeatField(4, nil, n)},
		{"wide packed zeros", wide, packedZeros(5, 10*n)},
		{"all empty pointer elements", all, repeatField(20, nil, n)},
		{"all message map entries", all, idEntries},
		{"all string map entries", all, entries},
		{"strings", strs, repeatField(1, []byte("abcdefgh"), n)},
		{"odd strings", strs, repeatField(1, bytes.Repeat([]byte("x"), 33), n)},
		{"long string", strs, repeatField(1, bytes.Repeat([]byte("<"), 10*n), 1)},
		{"unknown fields", all, repeatField(100, []byte("x"), n)},
		{"merged messages", all, repeatField(18, nil, n)},
		{"lists in merged messages", arr, repeatField(7, field(nil, 1, []byte("a")), n)},
		{"ordinary requests", wide, repeatField(3, nil, 0)},
		{"full requests merged", all, bytes.Repeat(one, n/10)},
	}
}

// TestGoWireAllocCounted measures with runtime/metrics what decodeWire
// really allocates for each allocShapes request, and holds it to the
// bytes decodeWire counted: the count is at least the allocations, less
// the allocator's rounding to its size classes (a fifth at most, which
// the bound leaves over) and a fixed 16 KiB for the runtime's own
// bookkeeping. The count is what the limit bounds, so this is what makes
// the limit a bound on memory.
func TestGoWireAllocCounted(t *testing.T) {
	for _, c := range allocShapes(t, 20000) {
		v := reflect.New(c.m.wire.goType)
		runtime.GC()
		before := heapAllocs()
		used, err := decodeWire(c.m.wire, c.body, v.Elem(), 1<<40, 100)
		got := heapAllocs() - before
		runtime.KeepAlive(v)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		t.Logf("%s: %d wire bytes, counted %d, allocated %d (%.2f)", c.name, len(c.body), used, got, float64(used)/float64(got))
		if float64(got) > 1.2*float64(used)+16<<10 {
			t.Errorf("%s: allocated %d bytes, counted %d", c.name, got, used)
		}
		// A list merged from many occurrences of its message grows by
		// doubling: a few slice headers' worth per wire byte, not a
		// copy of the list per occurrence.
		if c.name == "lists in merged messages" && used > 32*int64(len(c.body)) {
			t.Errorf("%s: counted %d bytes for %d wire bytes", c.name, used, len(c.body))
		}
	}
}

// TestGoWireBoundHolds decodes the adversarial allocShapes requests (the
// first seven) at 4 MB (just under the default MaxDecompressedSize) with
// the default bound (32 MiB): each
// either decodes within it or is refused with ResourceExhausted, and the
// allocations (runtime/metrics) stay within the bound plus the
// allocator's rounding (a fifth) and 64 KiB.
func TestGoWireBoundHolds(t *testing.T) {
	const limit = 32 << 20
	for _, c := range allocShapes(t, 20000)[:7] {
		body := c.body
		if len(body) > 0 {
			body = bytes.Repeat(body, max(1, 4_000_000/len(body)))
		}
		v := reflect.New(c.m.wire.goType)
		runtime.GC()
		before := heapAllocs()
		used, err := decodeWire(c.m.wire, body, v.Elem(), limit, 100)
		got := heapAllocs() - before
		runtime.KeepAlive(v)
		if err != nil && fleet.CodeOf(err) != fleet.ResourceExhausted {
			t.Fatalf("%s: %v", c.name, err)
		}
		t.Logf("%s: %d wire bytes, %v, counted %d, allocated %d", c.name, len(body), err, used, got)
		if float64(got) > 1.2*limit+64<<10 {
			t.Errorf("%s: allocated %d bytes, over the bound %d", c.name, got, limit)
		}
	}
}
