package gateway

import (
	"encoding"
	"fmt"
	"reflect"

	"github.com/fleetrpc/fleet"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// The reference path the gateway took before gowire.go: protobuf bytes
// decoded by protobuf-go into a dynamicpb message of the synthesized
// descriptor, then copied field by field into the Go value (and back for
// encoding). The tests hold the wire codec to it.

// decode (reference) turns protobuf bytes of g's message into a new *T (T the Go type).
func (g *goMessage) decode(b []byte) (any, error) {
	m := dynamicpb.NewMessage(g.md)
	if err := unmarshalDynamic(b, m); err != nil {
		return nil, fleet.WrapError(fleet.InvalidArgument, err)
	}
	v := reflect.New(g.plans[g.md.FullName()].goType)
	if err := g.toGo(m, v.Elem()); err != nil {
		return nil, fleet.WrapError(fleet.InvalidArgument, err)
	}
	return v.Interface(), nil
}

// unmarshalDynamic is proto.Unmarshal into a dynamicpb message, with a
// panic of protobuf-go's reflective decoder returned as an error. In
// google.golang.org/protobuf v1.36.12 a map entry that repeats its key
// field with another wire type after a valid key (entry bytes
// 0a 01 6b 08 00) panics in UnmarshalOptions.unmarshalMap ("cannot
// convert nil to map key"), and grpc-go does not recover a handler's
// panic: the process would die (found by FuzzGoTypes).
func unmarshalDynamic(b []byte, m proto.Message) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("proto: cannot parse invalid wire-format data: %v", r)
		}
	}()
	return proto.Unmarshal(b, m)
}

// encode (reference) turns a *T into protobuf bytes of g's message.
func (g *goMessage) encode(v any) ([]byte, error) {
	m := dynamicpb.NewMessage(g.md)
	if err := g.toProto(reflect.ValueOf(v).Elem(), m); err != nil {
		return nil, err
	}
	return proto.Marshal(m)
}

// toGo fills the Go value v (addressable) from the message m.
func (g *goMessage) toGo(m protoreflect.Message, v reflect.Value) error {
	plan := g.plans[m.Descriptor().FullName()]
	fields := m.Descriptor().Fields()
	if plan.wrapped {
		return g.fieldToGo(m, fields.Get(0), v)
	}
	for i, idx := range plan.fields {
		if err := g.fieldToGo(m, fields.Get(i), v.Field(idx)); err != nil {
			return err
		}
	}
	return nil
}

func (g *goMessage) fieldToGo(m protoreflect.Message, fd protoreflect.FieldDescriptor, v reflect.Value) error {
	if !m.Has(fd) {
		return nil
	}
	pv := m.Get(fd)
	switch {
	case fd.IsMap():
		t := v.Type()
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		out := reflect.MakeMapWithSize(t, pv.Map().Len())
		var err error
		pv.Map().Range(func(k protoreflect.MapKey, e protoreflect.Value) bool {
			kv := reflect.New(t.Key()).Elem()
			if err = g.valueToGo(fd.MapKey(), k.Value(), kv); err != nil {
				return false
			}
			ev := reflect.New(t.Elem()).Elem()
			if err = g.valueToGo(fd.MapValue(), e, ev); err != nil {
				return false
			}
			out.SetMapIndex(kv, ev)
			return true
		})
		if err != nil {
			return err
		}
		setDeref(v, out)
		return nil
	case fd.IsList():
		l := pv.List()
		t := v.Type()
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		var out reflect.Value
		if t.Kind() == reflect.Array {
			out = reflect.New(t).Elem()
		} else {
			out = reflect.MakeSlice(t, l.Len(), l.Len())
		}
		for i := 0; i < l.Len() && i < out.Len(); i++ {
			if err := g.valueToGo(fd, l.Get(i), out.Index(i)); err != nil {
				return err
			}
		}
		setDeref(v, out)
		return nil
	}
	return g.valueToGo(fd, pv, v)
}

// setDeref stores x in v, allocating through v's pointers.
func setDeref(v, x reflect.Value) {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		v = v.Elem()
	}
	v.Set(x)
}

// valueToGo stores one singular value pv into v (allocating pointers).
func (g *goMessage) valueToGo(fd protoreflect.FieldDescriptor, pv protoreflect.Value, v reflect.Value) error {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		v = v.Elem()
	}
	if fd.Kind() == protoreflect.StringKind && (v.Kind() != reflect.String || v.Addr().Type().Implements(textUnmarshaler)) {
		u, ok := v.Addr().Interface().(encoding.TextUnmarshaler)
		if !ok {
			return fmt.Errorf("%s cannot be set from text", v.Type())
		}
		return u.UnmarshalText([]byte(pv.String()))
	}
	switch fd.Kind() {
	case protoreflect.BoolKind:
		v.SetBool(pv.Bool())
	case protoreflect.Int32Kind, protoreflect.Int64Kind:
		if v.OverflowInt(pv.Int()) {
			return fmt.Errorf("field %s: %d overflows %s", fd.Name(), pv.Int(), v.Type())
		}
		v.SetInt(pv.Int())
	case protoreflect.Uint32Kind, protoreflect.Uint64Kind:
		if v.OverflowUint(pv.Uint()) {
			return fmt.Errorf("field %s: %d overflows %s", fd.Name(), pv.Uint(), v.Type())
		}
		v.SetUint(pv.Uint())
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		v.SetFloat(pv.Float())
	case protoreflect.StringKind:
		v.SetString(pv.String())
	case protoreflect.BytesKind:
		v.SetBytes(append([]byte(nil), pv.Bytes()...))
	case protoreflect.MessageKind:
		return g.toGo(pv.Message(), v)
	}
	return nil
}

// toProto fills the message m from the Go value v.
func (g *goMessage) toProto(v reflect.Value, m protoreflect.Message) error {
	plan := g.plans[m.Descriptor().FullName()]
	fields := m.Descriptor().Fields()
	if plan.wrapped {
		return g.fieldToProto(v, m, fields.Get(0))
	}
	for i, idx := range plan.fields {
		if err := g.fieldToProto(v.Field(idx), m, fields.Get(i)); err != nil {
			return err
		}
	}
	return nil
}

func (g *goMessage) fieldToProto(v reflect.Value, m protoreflect.Message, fd protoreflect.FieldDescriptor) error {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	switch {
	case fd.IsMap():
		if v.Len() == 0 {
			return nil
		}
		mp := m.Mutable(fd).Map()
		it := v.MapRange()
		for it.Next() {
			k, err := g.valueToProto(fd.MapKey(), it.Key(), nil)
			if err != nil {
				return err
			}
			e, err := g.valueToProto(fd.MapValue(), it.Value(), mp.NewValue)
			if err != nil {
				return err
			}
			mp.Set(k.MapKey(), e)
		}
		return nil
	case fd.IsList():
		if v.Len() == 0 {
			return nil
		}
		l := m.Mutable(fd).List()
		for i := range v.Len() {
			e, err := g.valueToProto(fd, v.Index(i), l.NewElement)
			if err != nil {
				return err
			}
			l.Append(e)
		}
		return nil
	}
	pv, err := g.valueToProto(fd, v, func() protoreflect.Value { return m.NewField(fd) })
	if err != nil || !pv.IsValid() {
		return err
	}
	m.Set(fd, pv)
	return nil
}

// valueToProto converts one singular Go value; newMsg makes an empty
// message value for message fields. A nil pointer gives an invalid
// Value (field left unset); for a list element, the zero value.
func (g *goMessage) valueToProto(fd protoreflect.FieldDescriptor, v reflect.Value, newMsg func() protoreflect.Value) (protoreflect.Value, error) {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			v = reflect.New(v.Type().Elem()).Elem()
			continue
		}
		v = v.Elem()
	}
	if fd.Kind() == protoreflect.StringKind && (v.Kind() != reflect.String || v.Type().Implements(textMarshaler)) {
		tm, ok := v.Interface().(encoding.TextMarshaler)
		if !ok && v.CanAddr() {
			tm, ok = v.Addr().Interface().(encoding.TextMarshaler)
		}
		if !ok {
			return protoreflect.Value{}, fmt.Errorf("%s cannot be turned into text", v.Type())
		}
		b, err := tm.MarshalText()
		if err != nil {
			return protoreflect.Value{}, err
		}
		return protoreflect.ValueOfString(string(b)), nil
	}
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(v.Bool()), nil
	case protoreflect.Int32Kind:
		return protoreflect.ValueOfInt32(int32(v.Int())), nil
	case protoreflect.Int64Kind:
		return protoreflect.ValueOfInt64(v.Int()), nil
	case protoreflect.Uint32Kind:
		return protoreflect.ValueOfUint32(uint32(v.Uint())), nil
	case protoreflect.Uint64Kind:
		return protoreflect.ValueOfUint64(v.Uint()), nil
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(float32(v.Float())), nil
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(v.Float()), nil
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(v.String()), nil
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes(v.Bytes()), nil
	case protoreflect.MessageKind:
		mv := newMsg()
		if err := g.toProto(v, mv.Message()); err != nil {
			return protoreflect.Value{}, err
		}
		return mv, nil
	}
	return protoreflect.Value{}, fmt.Errorf("unsupported field kind %s", fd.Kind())
}
