package gateway

import (
	"encoding"
	"fmt"
	"math"
	"reflect"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// appendWire appends the protobuf wire bytes of v, a value of w's Go type,
// to b, as proto.Marshal encodes the synthesized message that dynamicpb
// filled from v field by field: a zero scalar (false, 0, +0.0, "", empty
// bytes), a nil pointer and an empty list or map are left out; a struct
// field (not behind a nil pointer) is always written, even empty; lists
// of numbers and bools are packed; a map entry writes its key and value
// even when zero; a nil pointer in a list or map value is its zero value.
// Map entries come in the map's iteration order. It fails for a string
// that is not UTF-8 (as proto.Marshal does) and a TextMarshaler's error.
func appendWire(w *wireMsg, b []byte, v reflect.Value) ([]byte, error) {
	var err error
	for i := range w.fields {
		f := &w.fields[i]
		fv := v
		if f.index >= 0 {
			fv = v.Field(f.index)
		}
		for fv.Kind() == reflect.Pointer {
			if fv.IsNil() {
				break
			}
			fv = fv.Elem()
		}
		if fv.Kind() == reflect.Pointer {
			continue // nil
		}
		switch f.card {
		case cardMap:
			b, err = appendMap(f, b, fv)
		case cardList:
			b, err = appendList(f, b, fv)
		default:
			b, err = appendValue(&f.val, f.num, b, fv, false)
		}
		if err != nil {
			return b, fmt.Errorf("field %s: %w", f.name, err)
		}
	}
	return b, nil
}

func appendList(f *wireField, b []byte, list reflect.Value) ([]byte, error) {
	n := list.Len()
	if n == 0 {
		return b, nil
	}
	var err error
	if f.packable {
		b = protowire.AppendTag(b, f.num, protowire.BytesType)
		b, pos := beginLen(b)
		for i := range n {
			if b, err = appendScalar(&f.val, b, derefZero(list.Index(i))); err != nil {
				return b, err
			}
		}
		return endLen(b, pos), nil
	}
	for i := range n {
		if b, err = appendValue(&f.val, f.num, b, list.Index(i), true); err != nil {
			return b, err
		}
	}
	return b, nil
}

func appendMap(f *wireField, b []byte, m reflect.Value) ([]byte, error) {
	if m.Len() == 0 {
		return b, nil
	}
	k := reflect.New(f.cont.Key()).Elem()
	v := reflect.New(f.cont.Elem()).Elem()
	var err error
	for it := m.MapRange(); it.Next(); {
		k.SetIterKey(it)
		v.SetIterValue(it)
		b = protowire.AppendTag(b, f.num, protowire.BytesType)
		var pos int
		b, pos = beginLen(b)
		if b, err = appendValue(&f.key, 1, b, k, true); err != nil {
			return b, err
		}
		if b, err = appendValue(&f.val, 2, b, v, true); err != nil {
			return b, err
		}
		b = endLen(b, pos)
	}
	return b, nil
}

// derefZero follows v's pointers; a nil one gives the zero value (a new
// addressable one, for a MarshalText on the pointer).
func derefZero(v reflect.Value) reflect.Value {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return reflect.New(deref(v.Type())).Elem()
		}
		v = v.Elem()
	}
	return v
}

// appendValue appends field num holding v (a value of val.t); always
// writes a zero value too (list elements, map keys and values), else a
// zero scalar is left out.
func appendValue(val *wireValue, num protowire.Number, b []byte, v reflect.Value, always bool) ([]byte, error) {
	v = derefZero(v)
	if val.kind == protoreflect.MessageKind {
		b = protowire.AppendTag(b, num, protowire.BytesType)
		b, pos := beginLen(b)
		b, err := appendWire(val.msg, b, v)
		if err != nil {
			return b, err
		}
		return endLen(b, pos), nil
	}
	if val.textOut {
		text, err := marshalText(v)
		if err != nil {
			return b, err
		}
		if !always && len(text) == 0 {
			return b, nil
		}
		if !utf8.Valid(text) {
			return b, fmt.Errorf("text of %s is not valid UTF-8", v.Type())
		}
		return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), text), nil
	}
	if !always && isZeroGo(val, v) {
		return b, nil
	}
	b = protowire.AppendTag(b, num, val.wt)
	return appendScalar(val, b, v)
}

// isZeroGo reports whether the scalar v is left out of its message.
func isZeroGo(val *wireValue, v reflect.Value) bool {
	switch val.kind {
	case protoreflect.BoolKind:
		return !v.Bool()
	case protoreflect.Int32Kind, protoreflect.Int64Kind:
		return v.Int() == 0
	case protoreflect.Uint32Kind, protoreflect.Uint64Kind:
		return v.Uint() == 0
	case protoreflect.FloatKind:
		return math.Float32bits(float32(v.Float())) == 0
	case protoreflect.DoubleKind:
		return math.Float64bits(v.Float()) == 0
	case protoreflect.StringKind, protoreflect.BytesKind:
		return v.Len() == 0
	}
	return false
}

// appendScalar appends the value v (no pointer) without its tag.
func appendScalar(val *wireValue, b []byte, v reflect.Value) ([]byte, error) {
	switch val.kind {
	case protoreflect.BoolKind:
		return protowire.AppendVarint(b, protowire.EncodeBool(v.Bool())), nil
	case protoreflect.Int32Kind:
		return protowire.AppendVarint(b, uint64(int64(int32(v.Int())))), nil
	case protoreflect.Int64Kind:
		return protowire.AppendVarint(b, uint64(v.Int())), nil
	case protoreflect.Uint32Kind:
		return protowire.AppendVarint(b, uint64(uint32(v.Uint()))), nil
	case protoreflect.Uint64Kind:
		return protowire.AppendVarint(b, v.Uint()), nil
	case protoreflect.FloatKind:
		return protowire.AppendFixed32(b, math.Float32bits(float32(v.Float()))), nil
	case protoreflect.DoubleKind:
		return protowire.AppendFixed64(b, math.Float64bits(v.Float())), nil
	case protoreflect.BytesKind:
		return protowire.AppendBytes(b, v.Bytes()), nil
	case protoreflect.StringKind:
		s := v.String()
		if !utf8.ValidString(s) {
			return b, fmt.Errorf("string is not valid UTF-8")
		}
		return protowire.AppendString(b, s), nil
	}
	return b, fmt.Errorf("unsupported field kind %s", val.kind)
}

// beginLen appends a one-byte length placeholder and returns where the
// content starts; endLen writes the content's length there, moving the
// content when the length takes more than one byte (the speculative
// length of protobuf-go's encoder).
func beginLen(b []byte) ([]byte, int) { return append(b, 0), len(b) + 1 }

func endLen(b []byte, pos int) []byte {
	n := len(b) - pos
	k := protowire.SizeVarint(uint64(n))
	if k == 1 {
		b[pos-1] = byte(n)
		return b
	}
	for range k - 1 {
		b = append(b, 0)
	}
	copy(b[pos-1+k:], b[pos:pos+n])
	protowire.AppendVarint(b[:pos-1], uint64(n))
	return b
}

// marshalText returns v's text (v implements encoding.TextMarshaler, on
// its pointer when addressable).
func marshalText(v reflect.Value) ([]byte, error) {
	var tm encoding.TextMarshaler
	ok := false
	if v.CanAddr() {
		tm, ok = v.Addr().Interface().(encoding.TextMarshaler)
	}
	if !ok {
		tm, ok = v.Interface().(encoding.TextMarshaler)
	}
	if !ok {
		return nil, fmt.Errorf("%s cannot be turned into text", v.Type())
	}
	return tm.MarshalText()
}
