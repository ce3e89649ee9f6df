package gateway

import (
	"encoding"
	"fmt"
	"math"
	"reflect"
	"unicode/utf8"
	"unsafe"

	"github.com/fleetrpc/fleet"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// wireDecoder decodes the protobuf wire bytes of one request into its Go
// value and counts what it allocates (see decodeWire).
type wireDecoder struct {
	limit, used int64
	maxDepth    int
	// budget, when set, is charged ahead of what is counted, in steps of
	// at least budgetStep bytes (reserved counts what it was charged),
	// so that an allocation is charged before it is made.
	budget   func(n int64) error
	reserved int64
	// arrays counts the elements received so far by each array being
	// filled, by its address (unsafe.Pointer keys keep the memory alive,
	// so an address is never reused while decoding).
	arrays map[unsafe.Pointer]int
	// pending holds the conversion errors (overflow, text refused) of the
	// values stored so far, by the address of the value: a singular
	// field's later occurrence replaces the value and its error, as
	// protobuf-go keeps only the last value, which alone the former copy
	// into Go converted.
	pending map[unsafe.Pointer]error
}

// mapEntryCost is what one map entry is counted on top of its key and
// value sizes times mapEntryMul: the Go runtime's map tables (slots,
// control bytes, growth by doubling, values over 128 bytes stored apart)
// take up to about four times the key and value sizes per entry over the
// map's growth (measured by TestGoWireAllocCounted with runtime/metrics).
const (
	mapEntryMul  = 4
	mapEntryCost = 64
)

// decodeWire decodes b, protobuf wire bytes of w's message, into v (a
// settable value of w's Go type, zero or holding an earlier decoding to
// merge into), with the semantics stated in gowire.go. Each allocation it
// makes is counted before it is made: strings and byte slices their
// length, a pointer target its Go size, a slice its new backing array
// (sized once per message from the count of its elements in b, at least
// doubled when a merge grows it), a text value (encoding.TextUnmarshaler)
// its length, each of these allocPad more; a map entry mapEntryMul times
// its key and value sizes plus mapEntryCost. When the count would pass
// limit, it stops with ResourceExhausted. Bytes that are not protobuf
// wire format, strings that are not UTF-8, and messages or groups nested
// deeper than maxDepth are InvalidArgument at once; an integer that
// overflows its Go type or text its type refuses is InvalidArgument at
// the end, unless a later occurrence of the same singular field replaced
// it. It returns the bytes counted. v may be partly filled on error. It
// allocates nothing per unknown or skipped field.
func decodeWire(w *wireMsg, b []byte, v reflect.Value, limit int64, maxDepth int) (int64, error) {
	return decodeWireBudget(w, b, v, limit, maxDepth, nil)
}

// budgetStep is the least the decoder charges its budget at a time (see
// decodeWireBudget): fewer atomic updates of a shared budget per request,
// for up to this many bytes reserved and not used.
const budgetStep = 8 << 10

// decodeWireBudget is decodeWire that also charges budget (when not nil)
// with what it counts, before each allocation is made: ahead, in steps of
// at least budgetStep bytes, and never past limit. An error from budget
// stops the decoding and is returned unchanged.
func decodeWireBudget(w *wireMsg, b []byte, v reflect.Value, limit int64, maxDepth int, budget func(int64) error) (int64, error) {
	d := wireDecoder{limit: limit, maxDepth: maxDepth, budget: budget}
	err := d.message(w, b, v, 1)
	if err == nil {
		for _, perr := range d.pending {
			return d.used, perr
		}
	}
	return d.used, err
}

// allocPad is counted on top of each allocation's size: the runtime
// rounds small objects up to a size class (at most 15 bytes below 128
// bytes; above, up to about a fifth, which the bound leaves over).
const allocPad = 16

func (d *wireDecoder) charge(n int64) error {
	d.used += n
	if d.used > d.limit {
		return fleet.Errorf(fleet.ResourceExhausted, "decoding the request allocates more than %d bytes", d.limit)
	}
	if d.budget != nil && d.used > d.reserved {
		step := min(max(d.used-d.reserved, budgetStep), d.limit-d.reserved)
		if err := d.budget(step); err != nil {
			return err
		}
		d.reserved += step
	}
	return nil
}

func wireError(n int) error {
	return fleet.Errorf(fleet.InvalidArgument, "proto: cannot parse invalid wire-format data: %v", protowire.ParseError(n))
}

var errFieldNumber = fleet.NewError(fleet.InvalidArgument, "proto: cannot parse invalid wire-format data: invalid field number")

// message decodes the fields b of a message of plan w into v; an invalid
// v only checks them (array elements past the array's length).
func (d *wireDecoder) message(w *wireMsg, b []byte, v reflect.Value, depth int) error {
	if depth > d.maxDepth {
		return fleet.Errorf(fleet.InvalidArgument, "protobuf message nests deeper than %d levels", d.maxDepth)
	}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return wireError(n)
		}
		if num > protowire.MaxValidNumber {
			return errFieldNumber
		}
		b = b[n:]
		if int(num) <= len(w.fields) {
			f := &w.fields[num-1]
			fv := v
			if v.IsValid() && f.index >= 0 {
				fv = v.Field(f.index)
			}
			n, err := d.field(f, typ, b, fv, depth)
			if err != nil {
				return err
			}
			if n >= 0 {
				b = b[n:]
				continue
			}
		}
		n, err := d.skip(num, typ, b, depth)
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// skip skips the value b of an unknown field num of wire type typ and
// returns its length.
func (d *wireDecoder) skip(num protowire.Number, typ protowire.Type, b []byte, depth int) (int, error) {
	if typ == protowire.StartGroupType {
		return d.group(num, b, depth+1)
	}
	n := protowire.ConsumeFieldValue(num, typ, b)
	if n < 0 {
		return 0, wireError(n)
	}
	return n, nil
}

// group skips a group of field num whose start tag was just read, nested
// depth deep, and returns its length up to and including its end tag.
func (d *wireDecoder) group(num protowire.Number, b []byte, depth int) (int, error) {
	if depth > d.maxDepth {
		return 0, fleet.Errorf(fleet.InvalidArgument, "protobuf message nests deeper than %d levels", d.maxDepth)
	}
	for i := 0; ; {
		n2, typ, n := protowire.ConsumeTag(b[i:])
		if n < 0 {
			return 0, wireError(n)
		}
		i += n
		switch typ {
		case protowire.EndGroupType:
			if n2 != num {
				return 0, wireError(-1)
			}
			return i, nil
		case protowire.StartGroupType:
			m, err := d.group(n2, b[i:], depth+1)
			if err != nil {
				return 0, err
			}
			i += m
		default:
			m := protowire.ConsumeFieldValue(n2, typ, b[i:])
			if m < 0 {
				return 0, wireError(m)
			}
			i += m
		}
	}
}

// field decodes one occurrence of f whose value starts b (wire type typ)
// into fv, the field's Go value (invalid: check only). It returns the
// value's length, or -1 when the wire type does not fit f (the field is
// then skipped as unknown).
func (d *wireDecoder) field(f *wireField, typ protowire.Type, b []byte, fv reflect.Value, depth int) (int, error) {
	switch f.card {
	case cardMap:
		if typ != protowire.BytesType {
			return -1, nil
		}
		entry, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return 0, wireError(n)
		}
		return n, d.mapEntry(f, entry, fv, depth+1)
	case cardList:
		if typ == f.val.wt {
			return d.element(f, typ, b, fv, depth, b, typ)
		}
		if !f.packable || typ != protowire.BytesType {
			return -1, nil
		}
		packed, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return 0, wireError(n)
		}
		for len(packed) > 0 {
			m, err := d.element(f, f.val.wt, packed, fv, depth, b, typ)
			if err != nil {
				return 0, err
			}
			packed = packed[m:]
		}
		return n, nil
	}
	if typ != f.val.wt {
		return -1, nil
	}
	return d.value(&f.val, b, fv, true, depth)
}

// element decodes one list element from b (wire type typ) into the list
// fv. A full slice is grown for the elements counted from rest, the
// message from this field's occurrence (wire type restTyp) on.
func (d *wireDecoder) element(f *wireField, typ protowire.Type, b []byte, fv reflect.Value, depth int, rest []byte, restTyp protowire.Type) (int, error) {
	if !fv.IsValid() {
		return d.value(&f.val, b, fv, false, depth)
	}
	list, err := d.alloc(fv)
	if err != nil {
		return 0, err
	}
	if list.Kind() == reflect.Array {
		if d.arrays == nil {
			d.arrays = map[unsafe.Pointer]int{}
		}
		p := list.Addr().UnsafePointer()
		i := d.arrays[p]
		d.arrays[p] = i + 1
		var ev reflect.Value
		if i < list.Len() {
			ev = list.Index(i)
		}
		return d.value(&f.val, b, ev, false, depth)
	}
	n := list.Len()
	if n == list.Cap() {
		// Size the slice once for the elements of this message, counted
		// from here to its end; a list merged from several occurrences
		// of its message at least doubles, so merging stays linear.
		c := n + countElems(f, restTyp, rest)
		if n > 0 {
			c = max(c, 2*n)
		}
		if err := d.charge(int64(c)*int64(f.cont.Elem().Size()) + allocPad); err != nil {
			return 0, err
		}
		grown := reflect.MakeSlice(f.cont, n, c)
		reflect.Copy(grown, list)
		list.Set(grown)
	}
	list.SetLen(n + 1)
	return d.value(&f.val, b, list.Index(n), false, depth)
}

// countElems counts the list elements of f from the value b (wire type
// typ) to the end of b, the rest of the message: at least 1. It stops at
// bytes it cannot parse (the decoding fails there).
func countElems(f *wireField, typ protowire.Type, b []byte) int {
	c := 0
	for {
		n := protowire.ConsumeFieldValue(f.num, typ, b)
		if n < 0 {
			break
		}
		switch {
		case typ == f.val.wt:
			c++
		case f.packable && typ == protowire.BytesType:
			p, _ := protowire.ConsumeBytes(b)
			switch f.val.wt {
			case protowire.Fixed32Type:
				c += len(p) / 4
			case protowire.Fixed64Type:
				c += len(p) / 8
			default:
				for _, x := range p {
					if x < 0x80 {
						c++
					}
				}
			}
		}
		b = b[n:]
		for {
			if len(b) == 0 {
				return max(c, 1)
			}
			num, t, m := protowire.ConsumeTag(b)
			if m < 0 {
				return max(c, 1)
			}
			b = b[m:]
			if num == f.num {
				typ = t
				break
			}
			if m = protowire.ConsumeFieldValue(num, t, b); m < 0 {
				return max(c, 1)
			}
			b = b[m:]
		}
	}
	return max(c, 1)
}

// mapEntry decodes one map entry into the map fv.
func (d *wireDecoder) mapEntry(f *wireField, b []byte, fv reflect.Value, depth int) error {
	if depth > d.maxDepth {
		return fleet.Errorf(fleet.InvalidArgument, "protobuf message nests deeper than %d levels", d.maxDepth)
	}
	var m, kv, vv reflect.Value
	if fv.IsValid() {
		var err error
		if m, err = d.alloc(fv); err != nil {
			return err
		}
		if err := d.charge(mapEntryMul*int64(f.cont.Key().Size()+f.cont.Elem().Size()) + mapEntryCost); err != nil {
			return err
		}
		if m.IsNil() {
			m.Set(reflect.MakeMap(f.cont))
		}
		// Temporaries: reflect.New's allocations are counted by the
		// entry's cost.
		kv = reflect.New(f.cont.Key()).Elem()
		vv = reflect.New(f.cont.Elem()).Elem()
	}
	haveKey, haveVal := false, false
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return wireError(n)
		}
		if num > protowire.MaxValidNumber {
			return errFieldNumber
		}
		b = b[n:]
		n = -1
		var err error
		switch {
		case num == 1 && typ == f.key.wt:
			n, err = d.value(&f.key, b, kv, false, depth)
			haveKey = true
		case num == 2 && typ == f.val.wt:
			n, err = d.value(&f.val, b, vv, false, depth)
			haveVal = true
		}
		if err != nil {
			return err
		}
		if n < 0 {
			if n, err = d.skip(num, typ, b, depth); err != nil {
				return err
			}
		}
		b = b[n:]
	}
	if !haveKey {
		if err := d.zeroValue(&f.key, kv, depth); err != nil {
			return err
		}
	}
	if !haveVal {
		if err := d.zeroValue(&f.val, vv, depth); err != nil {
			return err
		}
	}
	if m.IsValid() {
		m.SetMapIndex(kv, vv)
	}
	return nil
}

// zeroValue sets ev as a list element or map entry of the zero wire value
// would: pointers allocated, text values given "".
func (d *wireDecoder) zeroValue(val *wireValue, ev reflect.Value, depth int) error {
	var zero []byte
	switch val.wt {
	case protowire.VarintType:
		zero = []byte{0}
	case protowire.Fixed32Type:
		zero = make([]byte, 4)
	case protowire.Fixed64Type:
		zero = make([]byte, 8)
	default:
		zero = []byte{0}
	}
	_, err := d.value(val, zero, ev, false, depth)
	return err
}

// alloc returns the value fv points to through its pointers, allocating
// (and counting) the nil ones.
func (d *wireDecoder) alloc(fv reflect.Value) (reflect.Value, error) {
	for fv.Kind() == reflect.Pointer {
		if fv.IsNil() {
			t := fv.Type().Elem()
			if err := d.charge(int64(t.Size()) + allocPad); err != nil {
				return reflect.Value{}, err
			}
			fv.Set(reflect.New(t))
		}
		fv = fv.Elem()
	}
	return fv, nil
}

// value decodes one value of plan val (its wire type checked) from b into
// ev, a value of type val.t (invalid: check only), and returns its
// length. A singular field's zero value sets ev to zero (pointers nil);
// a list element's or map value's is stored like any other.
func (d *wireDecoder) value(val *wireValue, b []byte, ev reflect.Value, singular bool, depth int) (int, error) {
	var (
		x     uint64
		bytes []byte
		n     int
	)
	switch val.wt {
	case protowire.VarintType:
		x, n = protowire.ConsumeVarint(b)
	case protowire.Fixed32Type:
		var y uint32
		y, n = protowire.ConsumeFixed32(b)
		x = uint64(y)
	case protowire.Fixed64Type:
		x, n = protowire.ConsumeFixed64(b)
	default:
		bytes, n = protowire.ConsumeBytes(b)
	}
	if n < 0 {
		return 0, wireError(n)
	}
	if val.kind == protoreflect.StringKind && !utf8.Valid(bytes) {
		return 0, fleet.Errorf(fleet.InvalidArgument, "proto: string field contains invalid UTF-8")
	}
	if val.kind == protoreflect.MessageKind {
		var target reflect.Value
		if ev.IsValid() {
			var err error
			if target, err = d.alloc(ev); err != nil {
				return 0, err
			}
		}
		return n, d.message(val.msg, bytes, target, depth+1)
	}
	if !ev.IsValid() {
		return n, nil
	}
	if singular && isZeroWire(val.kind, x, bytes) {
		ev.SetZero()
		d.settle(ev, nil)
		return n, nil
	}
	t, err := d.alloc(ev)
	if err != nil {
		return 0, err
	}
	err = d.set(val, t, x, bytes)
	if fleet.CodeOf(err) == fleet.ResourceExhausted {
		return 0, err
	}
	d.settle(ev, err)
	return n, nil
}

// settle records err as the conversion error of the value at ev (nil:
// none, replacing an earlier one).
func (d *wireDecoder) settle(ev reflect.Value, err error) {
	if err == nil && d.pending == nil {
		return
	}
	p := ev.Addr().UnsafePointer()
	if err == nil {
		delete(d.pending, p)
		return
	}
	if d.pending == nil {
		d.pending = map[unsafe.Pointer]error{}
	}
	d.pending[p] = err
}

// isZeroWire reports whether a proto3 scalar decoded as x or b is its
// field's zero value, which dynamicpb reports as not set.
func isZeroWire(k protoreflect.Kind, x uint64, b []byte) bool {
	switch k {
	case protoreflect.StringKind, protoreflect.BytesKind:
		return len(b) == 0
	case protoreflect.Int32Kind:
		return int32(x) == 0
	case protoreflect.Uint32Kind:
		return uint32(x) == 0
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		// +0.0 only: -0.0 is set (its sign bit).
		return x == 0
	}
	return x == 0
}

// set stores a decoded scalar into t (no pointer).
func (d *wireDecoder) set(val *wireValue, t reflect.Value, x uint64, b []byte) error {
	if val.textIn {
		u, ok := t.Addr().Interface().(encoding.TextUnmarshaler)
		if !ok {
			return fleet.Errorf(fleet.InvalidArgument, "%s cannot be set from text", t.Type())
		}
		if err := d.charge(int64(len(b)) + allocPad); err != nil {
			return err
		}
		// UnmarshalText must copy what it keeps (its contract), so it
		// reads the request's bytes in place.
		if err := u.UnmarshalText(b); err != nil {
			return fleet.WrapError(fleet.InvalidArgument, err)
		}
		return nil
	}
	switch val.kind {
	case protoreflect.BoolKind:
		t.SetBool(x != 0)
	case protoreflect.Int32Kind, protoreflect.Int64Kind:
		i := int64(x)
		if val.kind == protoreflect.Int32Kind {
			i = int64(int32(x))
		}
		if t.OverflowInt(i) {
			return fleet.Errorf(fleet.InvalidArgument, "%d overflows %s", i, t.Type())
		}
		t.SetInt(i)
	case protoreflect.Uint32Kind, protoreflect.Uint64Kind:
		if val.kind == protoreflect.Uint32Kind {
			x = uint64(uint32(x))
		}
		if t.OverflowUint(x) {
			return fleet.Errorf(fleet.InvalidArgument, "%d overflows %s", x, t.Type())
		}
		t.SetUint(x)
	case protoreflect.FloatKind:
		t.SetFloat(float64(math.Float32frombits(uint32(x))))
	case protoreflect.DoubleKind:
		t.SetFloat(math.Float64frombits(x))
	case protoreflect.StringKind:
		if err := d.charge(int64(len(b)) + allocPad); err != nil {
			return err
		}
		t.SetString(string(b))
	case protoreflect.BytesKind:
		if len(b) == 0 {
			t.SetBytes(nil)
			return nil
		}
		if err := d.charge(int64(len(b)) + allocPad); err != nil {
			return err
		}
		t.SetBytes(append([]byte(nil), b...))
	default:
		return fmt.Errorf("unsupported field kind %s", val.kind)
	}
	return nil
}
