package gateway

import (
	"math"
	"net"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"google.golang.org/protobuf/encoding/protowire"
)

// equalGo reports whether a and b hold the same Go value, as
// reflect.DeepEqual does (a nil slice or map differs from an empty one)
// except that NaN equals NaN and unexported fields are compared too.
func equalGo(a, b reflect.Value) bool {
	if a.IsValid() != b.IsValid() {
		return false
	}
	if !a.IsValid() {
		return true
	}
	if a.Type() != b.Type() {
		return false
	}
	switch a.Kind() {
	case reflect.Bool:
		return a.Bool() == b.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return a.Int() == b.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return a.Uint() == b.Uint()
	case reflect.Float32, reflect.Float64:
		x, y := a.Float(), b.Float()
		return x == y && math.Signbit(x) == math.Signbit(y) || math.IsNaN(x) && math.IsNaN(y)
	case reflect.String:
		return a.String() == b.String()
	case reflect.Slice:
		if a.IsNil() != b.IsNil() {
			return false
		}
		fallthrough
	case reflect.Array:
		if a.Len() != b.Len() {
			return false
		}
		for i := range a.Len() {
			if !equalGo(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Map:
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return false
		}
		for it := a.MapRange(); it.Next(); {
			if !equalGo(it.Value(), b.MapIndex(it.Key())) {
				return false
			}
		}
		return true
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return a.Pointer() == b.Pointer() || equalGo(a.Elem(), b.Elem())
	case reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return equalGo(a.Elem(), b.Elem())
	case reflect.Struct:
		for i := range a.NumField() {
			if !equalGo(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	case reflect.UnsafePointer, reflect.Chan, reflect.Func:
		return a.Pointer() == b.Pointer()
	case reflect.Complex64, reflect.Complex128:
		return a.Complex() == b.Complex()
	}
	panic("equalGo: kind " + a.Kind().String())
}

// decodeNew decodes b with the wire codec into a new value of m's Go type.
func decodeNew(m *goMessage, b []byte, limit int64) (reflect.Value, int64, error) {
	v := reflect.New(m.wire.goType)
	used, err := decodeWire(m.wire, b, v.Elem(), limit, 100)
	return v, used, err
}

// refPanicked reports whether the reference failed on a panic of
// protobuf-go's reflective decoder (unmarshalDynamic), on bytes that are
// valid protobuf: the wire codec decodes them.
func refPanicked(err error) bool {
	return err != nil && strings.Contains(err.Error(), "cannot convert nil to map key")
}

// checkWire holds the wire codec to the reference on msg, bytes of m's
// message: the same verdict and, when both decode, the same Go value; a
// bound of limit bytes refuses with ResourceExhausted, never otherwise;
// a decoded value encodes (appendWire) to bytes that both decode back to
// it, and so do the reference's encoding of it.
func checkWire(t *testing.T, m *goMessage, msg []byte, limit int64) {
	t.Helper()
	typ := m.wire.goType
	ref, rerr := m.decode(msg)
	got, used, err := decodeNew(m, msg, limit)
	switch {
	case fleet.CodeOf(err) == fleet.ResourceExhausted:
		if used <= limit {
			t.Fatalf("%s %q: %v with %d bytes counted, limit %d", typ, msg, err, used, limit)
		}
		return
	case err != nil && strings.Contains(err.Error(), "nests deeper"):
		return // the gateway's depth bound is below protobuf-go's
	case err != nil:
		if fleet.CodeOf(err) != fleet.InvalidArgument {
			t.Fatalf("%s %q: %v, not InvalidArgument", typ, msg, err)
		}
		if rerr == nil {
			t.Fatalf("%s %q: the wire codec refuses (%v) what the reference decodes to %+v", typ, msg, err, ref)
		}
		return
	case rerr != nil && !refPanicked(rerr):
		t.Fatalf("%s %q: the wire codec decodes %+v where the reference fails: %v", typ, msg, got.Interface(), rerr)
	case rerr == nil && !equalGo(reflect.ValueOf(ref), got):
		t.Fatalf("%s %q:\n wire codec %#v\n reference  %#v", typ, msg, got.Elem().Interface(), reflect.ValueOf(ref).Elem().Interface())
	}
	if used > limit {
		t.Fatalf("%s %q: decoded with %d bytes counted, over the limit %d", typ, msg, used, limit)
	}
	// Encoding.
	b, err := appendWire(m.wire, nil, got.Elem())
	if err != nil {
		if strings.Contains(err.Error(), "UTF-8") || strings.Contains(err.Error(), "text") {
			return // a TextMarshaler's output the reference refuses too
		}
		t.Fatalf("%s %+v: does not encode: %v", typ, got.Interface(), err)
	}
	back, _, err := decodeNew(m, b, 1<<40)
	if err != nil {
		t.Fatalf("%s %q: its encoding %q does not decode: %v", typ, msg, b, err)
	}
	refBack, err := m.decode(b)
	if err != nil {
		t.Fatalf("%s %q: its encoding %q does not decode with the reference: %v", typ, msg, b, err)
	}
	if !equalGo(back, reflect.ValueOf(refBack)) {
		t.Fatalf("%s %q: encoding %q decodes to\n %#v\n %#v (reference)", typ, msg, b, back.Elem().Interface(), reflect.ValueOf(refBack).Elem().Interface())
	}
	if rb, err := m.encode(got.Interface()); err == nil {
		back2, _, err := decodeNew(m, rb, 1<<40)
		if err != nil || !equalGo(back, back2) {
			t.Fatalf("%s %q: the reference's encoding %q decodes to %#v, %v; the codec's to %#v", typ, msg, rb, back2.Interface(), err, back.Interface())
		}
	}
}

// tag appends field num's tag of wire type typ.
func tag(b []byte, num protowire.Number, typ protowire.Type) []byte {
	return protowire.AppendTag(b, num, typ)
}

func field(b []byte, num protowire.Number, v []byte) []byte {
	return protowire.AppendBytes(tag(b, num, protowire.BytesType), v)
}

func varint(b []byte, num protowire.Number, x uint64) []byte {
	return protowire.AppendVarint(tag(b, num, protowire.VarintType), x)
}

// GTArr has arrays, also inside map values and list elements, for the
// merge and excess-element cases.
type GTArr struct {
	A    [2]int8
	In   GTArrIn
	M    map[string]GTArrIn
	L    []GTArrIn
	PA   *[2]string
	Text [1]time.Time
	N    GTArrNest
}

// GTArrNest has lists, merged when GTArr.N comes more than once.
type GTArrNest struct {
	S []string
	P []int32
}

// GTArrIn is GTArr's nested struct.
type GTArrIn struct{ B [2]uint8 }

// wireTypes are the Go types the wire tests decode: every shape the
// mapping covers (scalars, strings, bytes, nested structs, pointers,
// slices, arrays, maps, text values) and wrapped non-struct types.
func wireTypes() []reflect.Type {
	return []reflect.Type{
		reflect.TypeFor[GTAll](), reflect.TypeFor[GTWideList](), reflect.TypeFor[GTArr](),
		reflect.TypeFor[int8](), reflect.TypeFor[[]string](), reflect.TypeFor[map[string]GTInner](),
		reflect.TypeFor[time.Time](), reflect.TypeFor[[3]int16](), reflect.TypeFor[*GTInner](),
		reflect.TypeFor[map[uint16]*GTInner](), reflect.TypeFor[map[string][]byte](), reflect.TypeFor[net.IP](),
		reflect.TypeFor[[]net.IP](), reflect.TypeFor[map[int8]*string](), reflect.TypeFor[[]*int](),
		reflect.TypeFor[map[string]time.Time](), reflect.TypeFor[[][]byte](), reflect.TypeFor[float32](),
	}
}

// TestGoWireMatchesDynamicpb decodes hand-made wire bytes of every shape
// with the wire codec and with the reference (protobuf-go into dynamicpb,
// then the field-by-field copy): the same Go value or both refuse; and
// what the codec decodes it encodes back (checkWire). The cases cover
// merging, replacing, zero values, packed and unpacked lists, arrays past
// their length, unknown fields and wrong wire types, map entries without
// key or value, duplicate keys, overflow and bad UTF-8.
func TestGoWireMatchesDynamicpb(t *testing.T) {
	ms := map[reflect.Type]*goMessage{}
	for _, typ := range wireTypes() {
		m, err := goMessageOf(typ)
		if err != nil {
			t.Fatal(err)
		}
		ms[typ] = m
	}
	all := ms[reflect.TypeFor[GTAll]()]
	s := "x"
	seven := 7
	full := &GTAll{Name: "name", Small: -3, U8: 200, U16: 60000, I32: -1 << 31, Big: 1 << 63, F32: -0.5, F64: math.Inf(-1),
		On: true, Raw: []byte{0, 255}, Tags: []string{"a", "", "ü"}, Nums: []int{0, -1, 1 << 62}, Arr: [3]int16{-1, 0, 7},
		When: time.Date(2026, 11, 25, 17, 0, 0, 5, time.FixedZone("", 3600)), Wait: -time.Second, Addr: netip.MustParseAddr("fe80::1%eth0"),
		Inner: GTInner{X: math.NaN(), Y: math.Copysign(0, -1)}, Ptr: &GTInner{}, List: []GTInner{{}, {X: 1}},
		PList: []*GTInner{{Y: 2}, {}}, Count: map[string]int{"": 0, "a": -1}, ByID: map[int32]*GTInner{0: {}, -5: {X: 3}},
		Opt: &seven, PP: func() **string { p := &s; return &p }()}
	fullB, err := all.encode(full)
	if err != nil {
		t.Fatal(err)
	}
	inner := func(x float64) []byte {
		return protowire.AppendFixed64(tag(nil, 1, protowire.Fixed64Type), math.Float64bits(x))
	}
	entry := func(k, v []byte) []byte { return append(append([]byte(nil), k...), v...) }
	arr := ms[reflect.TypeFor[GTArr]()]
	cases := []struct {
		name string
		m    *goMessage
		b    []byte
	}{
		{"full", all, fullB},
		{"empty", all, nil},
		{"message merged", all, field(field(nil, 17, inner(1)), 17, protowire.AppendFixed64(tag(nil, 2, protowire.Fixed64Type), 7))},
		{"pointer message merged", all, field(field(nil, 18, inner(1)), 18, nil)},
		{"scalar replaced by zero", all, varint(varint(nil, 2, 5), 2, 0)},
		{"pointer scalar zeroed", all, varint(varint(nil, 23, 5), 23, 0)},
		{"pointer scalar zero", all, varint(nil, 23, 0)},
		{"double pointer", all, field(nil, 24, []byte("p"))},
		{"double pointer empty", all, field(nil, 24, nil)},
		{"text zero", all, field(nil, 14, nil)},
		{"text bad", all, field(nil, 14, []byte("not a time"))},
		{"negative zero", all, protowire.AppendFixed64(tag(nil, 8, protowire.Fixed64Type), 1<<63)},
		{"packed and unpacked", all, varint(field(varint(nil, 12, 1), 12, []byte{2, 3, 0x80, 1}), 12, 4)},
		{"packed truncated", all, field(nil, 12, []byte{0x80})},
		{"array excess", all, field(nil, 13, []byte{1, 2, 3, 4, 5})},
		{"array excess overflow", all, field(nil, 13, []byte{1, 2, 3, 0xff, 0xff, 0x7f})},
		{"array overflow", all, field(nil, 13, []byte{0xff, 0xff, 0x7f})},
		{"int8 overflow", all, varint(nil, 2, 300)},
		{"int8 overflow replaced", all, varint(varint(nil, 2, 300), 2, 5)},
		{"int8 overflow zeroed", all, varint(varint(nil, 2, 300), 2, 0)},
		{"text bad replaced", all, field(field(nil, 14, []byte("bad")), 14, nil)},
		{"text bad in merged message", arr, field(field(nil, 2, field(nil, 1, []byte{0xff, 0x01})), 2, field(nil, 1, []byte{1}))},
		{"map key overflow replaced", ms[reflect.TypeFor[map[int8]*string]()], field(nil, 1, varint(varint(nil, 1, 200), 1, 3))},
		{"int8 truncated to int32", all, varint(nil, 2, 1<<32|5)},
		{"negative int32", all, varint(nil, 5, math.MaxUint64)},
		{"uint8 overflow", all, varint(nil, 3, 256)},
		{"bad utf8", all, field(nil, 1, []byte{0xff})},
		{"bad utf8 in list", all, field(nil, 11, []byte{0xc0})},
		{"bytes empty", all, field(field(nil, 10, []byte("x")), 10, nil)},
		{"list of empty messages", all, field(field(nil, 19, nil), 20, nil)},
		{"map entry empty", all, field(nil, 21, nil)},
		{"map entry no value", all, field(nil, 22, varint(nil, 1, 9))},
		{"map duplicate keys", all, field(field(nil, 22, entry(varint(nil, 1, 9), field(nil, 2, inner(1)))), 22, varint(nil, 1, 9))},
		{"map value merged in entry", all, field(nil, 22, entry(field(nil, 2, inner(1)), field(nil, 2, protowire.AppendFixed64(tag(nil, 2, protowire.Fixed64Type), 7))))},
		{"map key wrong type after key", all, field(nil, 21, []byte("\x0a\x01k\x08\x00"))},
		{"map key wrong type", all, field(nil, 21, []byte("\x08\x00\x10\x05"))},
		{"map key bad utf8", all, field(nil, 21, []byte("\x0a\x01\xff"))},
		{"map key overflow", ms[reflect.TypeFor[map[int8]*string]()], field(nil, 1, varint(nil, 1, 200))},
		{"map pointer value missing", ms[reflect.TypeFor[map[int8]*string]()], field(nil, 1, varint(nil, 1, 2))},
		{"map unknown in entry", all, field(nil, 21, entry(field(nil, 7, []byte("zz")), varint(nil, 2, 4)))},
		{"map wrong wire type", all, varint(nil, 21, 1)},
		{"unknown fields", all, append(varint(field(nil, 100, []byte("x")), 99, 1), protowire.AppendFixed32(tag(nil, 98, protowire.Fixed32Type), 1)...)},
		{"wrong wire type", all, append(varint(nil, 1, 5), protowire.AppendFixed32(tag(nil, 3, protowire.Fixed32Type), 1)...)},
		{"message wrong wire type", all, varint(nil, 17, 1)},
		{"list wrong wire type", all, protowire.AppendFixed64(tag(nil, 11, protowire.Fixed64Type), 1)},
		{"unknown group", all, append(append(tag(nil, 50, protowire.StartGroupType), varint(nil, 1, 1)...), tag(nil, 50, protowire.EndGroupType)...)},
		{"group wrong end", all, append(tag(nil, 50, protowire.StartGroupType), tag(nil, 51, protowire.EndGroupType)...)},
		{"lone end group", all, tag(nil, 50, protowire.EndGroupType)},
		{"field zero", all, []byte{0x00, 0x01}},
		{"field number too big", all, varint(nil, protowire.MaxValidNumber+1, 1)},
		{"truncated", all, fullB[:len(fullB)-1]},
		{"wire type 7", all, []byte{0x0f}},
		{"array merge", arr, field(field(nil, 2, field(nil, 1, []byte{1})), 2, field(nil, 1, []byte{2, 3}))},
		{"array in map value", arr, field(field(nil, 3, entry(field(nil, 1, []byte("k")), field(nil, 2, field(nil, 1, []byte{1, 2, 3})))), 3, field(nil, 2, field(nil, 1, []byte{4})))},
		{"array in list element", arr, field(field(nil, 4, field(nil, 1, []byte{1})), 4, field(nil, 1, []byte{2, 3}))},
		{"pointer array", arr, field(field(field(nil, 5, []byte("a")), 5, nil), 5, []byte("c"))},
		{"text array excess bad", arr, field(field(nil, 6, []byte("2026-11-25T17:00:00Z")), 6, []byte("bad"))},
		{"text array empty", arr, field(nil, 6, nil)},
		{"lists merged", arr, field(field(field(field(nil, 7, field(nil, 1, []byte("a"))), 7, field(field(nil, 1, []byte("b")), 1, []byte("c"))), 7, field(nil, 2, []byte{1, 2, 3})), 7, varint(field(nil, 2, []byte{4}), 2, 5))},
		{"wrapped int8", ms[reflect.TypeFor[int8]()], varint(nil, 1, math.MaxUint64)},
		{"wrapped strings", ms[reflect.TypeFor[[]string]()], field(field(nil, 1, []byte("a")), 1, nil)},
		{"wrapped map", ms[reflect.TypeFor[map[string]GTInner]()], field(nil, 1, entry(field(nil, 1, []byte("k")), field(nil, 2, inner(2))))},
		{"wrapped time", ms[reflect.TypeFor[time.Time]()], field(nil, 1, []byte("2026-11-25T17:00:00.5+02:00"))},
		{"wrapped array", ms[reflect.TypeFor[[3]int16]()], field(nil, 1, []byte{1, 2})},
		{"wrapped pointer", ms[reflect.TypeFor[*GTInner]()], field(nil, 1, nil)},
		{"map of pointers", ms[reflect.TypeFor[map[uint16]*GTInner]()], field(field(nil, 1, nil), 1, varint(nil, 1, 70000))},
		{"map of bytes", ms[reflect.TypeFor[map[string][]byte]()], field(field(nil, 1, field(nil, 2, nil)), 1, entry(field(nil, 1, []byte("a")), field(nil, 2, []byte("b"))))},
		{"net.IP", ms[reflect.TypeFor[net.IP]()], field(nil, 1, []byte{127, 0, 0, 1})},
		{"net.IP overflow", ms[reflect.TypeFor[net.IP]()], field(nil, 1, []byte{0x80, 0x02})},
		{"[]net.IP", ms[reflect.TypeFor[[]net.IP]()], field(field(nil, 1, []byte("::1")), 1, []byte("x"))},
		{"[]*int", ms[reflect.TypeFor[[]*int]()], field(nil, 1, []byte{0, 1})},
		{"map of times no value", ms[reflect.TypeFor[map[string]time.Time]()], field(nil, 1, field(nil, 1, []byte("k")))},
		{"[][]byte", ms[reflect.TypeFor[[][]byte]()], field(field(nil, 1, nil), 1, []byte("x"))},
		{"float32", ms[reflect.TypeFor[float32]()], protowire.AppendFixed32(tag(nil, 1, protowire.Fixed32Type), math.Float32bits(float32(math.NaN())))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { checkWire(t, c.m, c.b, 1<<30) })
	}
}

// TestGoWireMapEntryDecodes: the map entry that made protobuf-go's
// reflective decoder panic (key "k", then field 1 again as a varint) is
// valid protobuf: the varint is a field of another wire type, skipped.
func TestGoWireMapEntryDecodes(t *testing.T) {
	m, err := goMessageOf(reflect.TypeFor[map[string]int]())
	if err != nil {
		t.Fatal(err)
	}
	v, _, err := decodeNew(m, field(nil, 1, []byte("\x0a\x01k\x08\x00")), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if got := *v.Interface().(*map[string]int); len(got) != 1 || got["k"] != 0 {
		t.Fatalf("got %v", got)
	}
	if _, err := m.decode(field(nil, 1, []byte("\x0a\x01k\x08\x00"))); !refPanicked(err) {
		t.Fatalf("reference: %v", err)
	}
}

// TestGoWireEncodeErrors: a reply string that is not UTF-8 and a failing
// TextMarshaler do not encode.
func TestGoWireEncodeErrors(t *testing.T) {
	m, err := goMessageOf(reflect.TypeFor[GTAll]())
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []*GTAll{
		{Name: "\xff"},
		{Tags: []string{"ok", "\xc0"}},
		{Count: map[string]int{"\xff": 1}},
		{When: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}, // MarshalText fails past year 9999
	} {
		if b, err := appendWire(m.wire, nil, reflect.ValueOf(v).Elem()); err == nil {
			t.Fatalf("%+v encoded as %q", v, b)
		}
	}
}

// TestGoWireLimit: a bound below what a request needs refuses it with
// ResourceExhausted and a count past the bound; at the count it decodes.
func TestGoWireLimit(t *testing.T) {
	m, err := goMessageOf(reflect.TypeFor[GTAll]())
	if err != nil {
		t.Fatal(err)
	}
	v := &GTAll{Name: strings.Repeat("n", 1000), Tags: []string{"a", "b"}, Nums: make([]int, 100), List: make([]GTInner, 10),
		Count: map[string]int{"a": 1}, Ptr: &GTInner{}, PList: []*GTInner{{}}}
	b, err := appendWire(m.wire, nil, reflect.ValueOf(v).Elem())
	if err != nil {
		t.Fatal(err)
	}
	_, need, err := decodeNew(m, b, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	if need < 1000+100*8+10*16 {
		t.Fatalf("counted %d bytes", need)
	}
	if _, _, err := decodeNew(m, b, need); err != nil {
		t.Fatalf("at the bound: %v", err)
	}
	_, used, err := decodeNew(m, b, need-1)
	if fleet.CodeOf(err) != fleet.ResourceExhausted || used <= need-1 {
		t.Fatalf("below the bound: %v, %d counted", err, used)
	}
}

// FuzzGoWire decodes arbitrary bytes as the message of one of the wire
// tests' Go types (wireTypes, chosen by typ) under an allocation bound of
// limit bytes, and holds the wire codec to the reference (checkWire): no
// panic; the reference's verdict and Go value (ResourceExhausted only
// past the bound, and the gateway's lower depth bound aside); a decoded
// value encodes to bytes both decode back to it. The seed corpus is in
// testdata/fuzz/FuzzGoWire.
func FuzzGoWire(f *testing.F) {
	types := wireTypes()
	for i, typ := range types {
		m, err := goMessageOf(typ)
		if err != nil {
			f.Fatal(err)
		}
		if i == 0 {
			v := &GTAll{Name: "n", Tags: []string{"a"}, Nums: []int{1, 2}, Count: map[string]int{"k": 1}, PList: []*GTInner{{X: 1}}}
			b, err := m.encode(v)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(uint8(i), uint32(1<<20), b)
			f.Add(uint8(i), uint32(64), b)
		}
	}
	f.Fuzz(func(t *testing.T, typ uint8, limit uint32, msg []byte) {
		m, err := goMessageOf(types[int(typ)%len(types)])
		if err != nil {
			t.Fatal(err)
		}
		checkWire(t, m, msg, int64(limit))
	})
}

// GTWide is a struct of many fields: an empty element of a []GTWide is 2
// wire bytes but a 336-byte Go struct once decoded.
type GTWide struct {
	F01, F02, F03, F04, F05, F06, F07, F08, F09, F10 int64
	S01, S02, S03, S04, S05, S06, S07, S08, S09, S10 string
	B01, B02, B03, B04, B05, B06, B07, B08, B09, B10 bool
	D01, D02, D03, D04, D05, D06, D07, D08, D09, D10 float64
}

// GTWideList is the argument of the allocation tests' methods: field 1
// Name, 2 Items, 3 Ptrs, 4 ByID, 5 Nums.
type GTWideList struct {
	Name  string
	Items []GTWide
	Ptrs  []*GTWide
	ByID  map[int32]GTWide
	Nums  []int
}
