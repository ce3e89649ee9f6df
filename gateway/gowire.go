package gateway

import (
	"fmt"
	"reflect"
	"sync/atomic"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The wire codec of Go types (see docs/gateway.md, "Go types over gRPC"):
// protobuf wire bytes of a synthesized message are decoded straight into
// the Go value (gowire_decode.go) and a Go value is encoded straight into
// them (gowire_encode.go), with google.golang.org/protobuf/encoding/protowire
// for the wire primitives and package reflect for the Go side. The plans
// below are built once per Go type, from the synthesized descriptor and
// the Go type side by side (the descriptor's field i+1 is the Go field
// msgPlan.fields[i]), so what is decoded is exactly what reflection
// describes. The semantics are protobuf-go's for proto3 messages, as
// dynamicpb applies them, followed by the field-by-field copy into Go
// that the gateway used to make (TestGoWireMatchesDynamicpb checks both
// agree):
//
//   - a scalar field replaces the previous value; a zero scalar (false,
//     0, +0.0, "", empty bytes) leaves the Go field zero (a pointer nil);
//     a message field merges into the previous one; list elements and map
//     entries accumulate, a map entry replacing an earlier one of the same
//     key;
//   - a field the message does not declare, or one of another wire type,
//     is skipped; repeated numbers are read packed or not;
//   - strings must be UTF-8; an integer is truncated to its protobuf type
//     (int32, uint32) and must fit its Go type;
//   - a list element or map value is always set (a pointer allocated),
//     even when zero; a map entry without a key or value has the zero one;
//   - an array takes the first elements, the others are checked but not
//     stored.

// wireMsg is the wire plan of one synthesized message.
type wireMsg struct {
	goType reflect.Type
	name   protoreflect.FullName
	// fields[i] is field number i+1.
	fields []wireField
	// lastSize is the length of the last encoding of a top-level value,
	// the capacity the next one starts with.
	lastSize atomic.Int64
}

// Field cardinalities.
const (
	cardSingular = iota
	cardList
	cardMap
)

// wireField is the plan of one field of a wireMsg.
type wireField struct {
	num  protowire.Number
	name protoreflect.Name
	// index is the Go struct field's index, -1 for the wrapped value
	// (the message's Go value itself).
	index int
	card  int
	// cont is, for a list or map, the slice, array or map type (the
	// field's type without its pointers).
	cont reflect.Type
	// packable is true for a list of numbers or bools, which may come
	// packed.
	packable bool
	// val is the singular value, the list element or the map value; key
	// the map key.
	val, key wireValue
}

// wireValue is the plan of one value: a singular field's, a list
// element's, a map key's or value's.
type wireValue struct {
	kind protoreflect.Kind
	wt   protowire.Type
	// t is the Go type (pointers included), base the type without them.
	t, base reflect.Type
	// textIn decodes through encoding.TextUnmarshaler, textOut encodes
	// through encoding.TextMarshaler (the conditions of the former
	// dynamicpb copy).
	textIn, textOut bool
	msg             *wireMsg
}

// buildWire returns the wire plan of the synthesized message md, whose
// messages map to Go types as plans says.
func buildWire(md protoreflect.MessageDescriptor, plans map[protoreflect.FullName]*msgPlan) (*wireMsg, error) {
	memo := map[protoreflect.FullName]*wireMsg{}
	return wireOf(md, plans, memo)
}

func wireOf(md protoreflect.MessageDescriptor, plans map[protoreflect.FullName]*msgPlan, memo map[protoreflect.FullName]*wireMsg) (*wireMsg, error) {
	if w := memo[md.FullName()]; w != nil {
		return w, nil
	}
	plan := plans[md.FullName()]
	if plan == nil {
		return nil, fmt.Errorf("no Go type for message %s", md.FullName())
	}
	w := &wireMsg{goType: plan.goType, name: md.FullName()}
	memo[md.FullName()] = w
	fields := md.Fields()
	w.fields = make([]wireField, fields.Len())
	for i := range fields.Len() {
		fd := fields.Get(i)
		if int(fd.Number()) != i+1 {
			return nil, fmt.Errorf("field %s is number %d, not %d", fd.FullName(), fd.Number(), i+1)
		}
		f := &w.fields[i]
		f.num, f.name, f.index = fd.Number(), fd.Name(), -1
		ft := plan.goType
		if !plan.wrapped {
			f.index = plan.fields[i]
			ft = plan.goType.Field(f.index).Type
		}
		var err error
		switch {
		case fd.IsMap():
			f.card, f.cont = cardMap, deref(ft)
			if f.key, err = valueOf(fd.MapKey(), f.cont.Key(), plans, memo); err != nil {
				return nil, err
			}
			if f.val, err = valueOf(fd.MapValue(), f.cont.Elem(), plans, memo); err != nil {
				return nil, err
			}
		case fd.IsList():
			f.card, f.cont = cardList, deref(ft)
			if f.val, err = valueOf(fd, f.cont.Elem(), plans, memo); err != nil {
				return nil, err
			}
			f.packable = f.val.wt != protowire.BytesType
		default:
			if f.val, err = valueOf(fd, ft, plans, memo); err != nil {
				return nil, err
			}
		}
	}
	return w, nil
}

// valueOf is the plan of one value of fd (its element for a list) held in
// Go type t.
func valueOf(fd protoreflect.FieldDescriptor, t reflect.Type, plans map[protoreflect.FullName]*msgPlan, memo map[protoreflect.FullName]*wireMsg) (wireValue, error) {
	v := wireValue{kind: fd.Kind(), wt: wireType(fd.Kind()), t: t, base: deref(t)}
	if v.kind == protoreflect.StringKind {
		v.textIn = v.base.Kind() != reflect.String || reflect.PointerTo(v.base).Implements(textUnmarshaler)
		v.textOut = v.base.Kind() != reflect.String || v.base.Implements(textMarshaler)
	}
	if v.kind == protoreflect.MessageKind {
		m, err := wireOf(fd.Message(), plans, memo)
		if err != nil {
			return v, err
		}
		v.msg = m
	}
	return v, nil
}

// wireType is the wire type of one value of kind k.
func wireType(k protoreflect.Kind) protowire.Type {
	switch k {
	case protoreflect.FloatKind, protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind:
		return protowire.Fixed32Type
	case protoreflect.DoubleKind, protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind:
		return protowire.Fixed64Type
	case protoreflect.StringKind, protoreflect.BytesKind, protoreflect.MessageKind, protoreflect.GroupKind:
		return protowire.BytesType
	}
	return protowire.VarintType
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}
