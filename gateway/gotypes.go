package gateway

import (
	"encoding"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"unicode"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// goMessage is the protobuf message synthesized for a Go type that is not
// a protobuf message (see docs/gateway.md, "Go types over gRPC"): its file
// (one per Go type, in package fleet.gotypes[.<go package>]), and for the
// top-level message and each nested one, how its fields map to the Go
// struct's fields.
type goMessage struct {
	file protoreflect.FileDescriptor
	md   protoreflect.MessageDescriptor
	// plans maps a message's full name to its field plan.
	plans map[protoreflect.FullName]*msgPlan
	// wire is the top-level message's wire plan (gowire.go).
	wire *wireMsg
}

// msgPlan says how one synthesized message maps to its Go type: wrapped
// is true for a non-struct type held in field 1 "value"; otherwise
// fields[i] is the Go struct field index of field number i+1.
type msgPlan struct {
	goType  reflect.Type
	wrapped bool
	fields  []int
}

var (
	goTypesMu sync.Mutex
	// goTypes caches reflect.Type -> *goMessage or error, process-wide:
	// the descriptors depend on the Go type only.
	goTypes = map[reflect.Type]any{}
	// goNames holds the full names given out, so two Go types never get
	// the same message name.
	goNames = map[protoreflect.FullName]reflect.Type{}
)

var (
	textMarshaler   = reflect.TypeFor[encoding.TextMarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// goMessageOf returns the synthesized message of the Go type t (the A of a
// method taking *A), built on first use and cached. It fails for types
// the mapping does not cover (channels, functions, interfaces, complex
// numbers, nested slices, recursive types...).
func goMessageOf(t reflect.Type) (*goMessage, error) {
	goTypesMu.Lock()
	defer goTypesMu.Unlock()
	if v, ok := goTypes[t]; ok {
		if err, bad := v.(error); bad {
			return nil, err
		}
		return v.(*goMessage), nil
	}
	m, err := buildGoMessage(t)
	if err != nil {
		err = fmt.Errorf("gateway: Go type %s has no protobuf form: %w", t, err)
		goTypes[t] = err
		return nil, err
	}
	goTypes[t] = m
	return m, nil
}

// protoIdent turns s into a protobuf identifier: characters other than
// letters, digits and '_' become '_', and a leading digit gets a '_'.
func protoIdent(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			b[i] = '_'
		}
	}
	if len(b) == 0 || b[0] >= '0' && b[0] <= '9' {
		b = append([]byte{'_'}, b...)
	}
	return string(b)
}

// buildGoMessage synthesizes t's file; goTypesMu is held.
func buildGoMessage(t reflect.Type) (*goMessage, error) {
	pkg := "fleet.gotypes"
	name := t.Name()
	if t.PkgPath() != "" {
		p := t.PkgPath()
		pkg += "." + protoIdent(p[strings.LastIndexByte(p, '/')+1:])
	}
	if name == "" {
		name = t.String()
	}
	name = protoIdent(name)
	if r := []rune(name); unicode.IsLower(r[0]) {
		r[0] = unicode.ToUpper(r[0])
		name = string(r)
	}
	full := protoreflect.FullName(pkg + "." + name)
	for i := 2; goNames[full] != nil && goNames[full] != t; i++ {
		full = protoreflect.FullName(fmt.Sprintf("%s.%s_%d", pkg, name, i))
	}
	b := &goBuilder{plans: map[protoreflect.FullName]*msgPlan{}, busy: map[reflect.Type]bool{}}
	dp, err := b.message(t, full.Name(), full)
	if err != nil {
		return nil, err
	}
	fdp := &descriptorpb.FileDescriptorProto{
		Name:        proto.String("fleet/gotypes/" + string(full) + ".proto"),
		Package:     proto.String(pkg),
		Syntax:      proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{dp},
	}
	fd, err := protodesc.NewFile(fdp, new(protoregistry.Files))
	if err != nil {
		return nil, err
	}
	md := fd.Messages().Get(0)
	w, err := buildWire(md, b.plans)
	if err != nil {
		return nil, err
	}
	goNames[full] = t
	return &goMessage{file: fd, md: md, plans: b.plans, wire: w}, nil
}

// goBuilder builds the descriptor of one top-level Go type.
type goBuilder struct {
	plans map[protoreflect.FullName]*msgPlan
	busy  map[reflect.Type]bool // struct types being built: a cycle fails
}

// message builds the message for t named name (full name full): a struct's
// exported fields, else a wrapper with one field "value".
func (b *goBuilder) message(t reflect.Type, name protoreflect.Name, full protoreflect.FullName) (*descriptorpb.DescriptorProto, error) {
	dp := &descriptorpb.DescriptorProto{Name: proto.String(string(name))}
	plan := &msgPlan{goType: t}
	b.plans[full] = plan
	if t.Kind() != reflect.Struct || t.Implements(textMarshaler) || reflect.PointerTo(t).Implements(textMarshaler) {
		plan.wrapped = true
		if err := b.field(dp, full, "value", "value", t); err != nil {
			return nil, err
		}
		return dp, nil
	}
	if b.busy[t] {
		return nil, fmt.Errorf("recursive type %s", t)
	}
	b.busy[t] = true
	defer delete(b.busy, t)
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		jsonName := f.Name
		if tag, ok := f.Tag.Lookup("json"); ok {
			n, _, _ := strings.Cut(tag, ",")
			if n == "-" && !strings.HasPrefix(tag, "-,") {
				continue
			}
			if validJSONName(n) {
				jsonName = n
			}
		}
		if err := b.field(dp, full, protoIdent(jsonName), jsonName, f.Type); err != nil {
			return nil, fmt.Errorf("field %s: %w", f.Name, err)
		}
		plan.fields = append(plan.fields, i)
	}
	return dp, nil
}

// validJSONName reports whether encoding/json takes n, a json tag's name,
// as the field's name (else it uses the Go field name, and so does the
// mapping): n is not empty and has only letters, digits, spaces and the
// punctuation !#$%&()*+-./:;<=>?@[]^_{|}~ (the rule of encoding/json's
// tag parsing).
func validJSONName(n string) bool {
	if n == "" {
		return false
	}
	for _, r := range n {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && !strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", r) {
			return false
		}
	}
	return true
}

// field appends to dp the field for Go type t, numbered after the last.
func (b *goBuilder) field(dp *descriptorpb.DescriptorProto, parent protoreflect.FullName, name, jsonName string, t reflect.Type) error {
	fp := &descriptorpb.FieldDescriptorProto{
		Name:     proto.String(name),
		JsonName: proto.String(jsonName),
		Number:   proto.Int32(int32(len(dp.Field) + 1)),
		Label:    descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(),
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 && !t.Implements(textMarshaler):
		// []byte: bytes, as encoding/json's base64.
	case t.Kind() == reflect.Slice || t.Kind() == reflect.Array:
		fp.Label = descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum()
		t = t.Elem()
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if (t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.Uint8) || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
			return fmt.Errorf("nested repeated type %s", t)
		}
	case t.Kind() == reflect.Map:
		entry := protoreflect.Name(camel(name) + "Entry")
		ep := &descriptorpb.DescriptorProto{
			Name:    proto.String(string(entry)),
			Options: &descriptorpb.MessageOptions{MapEntry: proto.Bool(true)},
		}
		efull := parent.Append(entry)
		kt := t.Key()
		// String and integer keys only, as encoding/json (HTTP/JSON and
		// JSON-RPC) takes them: a bool key is refused.
		switch kt.Kind() {
		case reflect.String, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		default:
			return fmt.Errorf("map key type %s", kt)
		}
		if err := b.field(ep, efull, "key", "key", kt); err != nil {
			return err
		}
		vt := t.Elem()
		for vt.Kind() == reflect.Pointer {
			vt = vt.Elem()
		}
		if (vt.Kind() == reflect.Slice && vt.Elem().Kind() != reflect.Uint8) || vt.Kind() == reflect.Array || vt.Kind() == reflect.Map {
			return fmt.Errorf("map value type %s", vt)
		}
		// The value's message, if any, is nested in dp: a map entry
		// declares nothing of its own.
		vtyp, err := b.scalar(dp, parent, vt)
		if err != nil {
			return err
		}
		vf := &descriptorpb.FieldDescriptorProto{
			Name: proto.String("value"), JsonName: proto.String("value"), Number: proto.Int32(2),
			Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(), Type: vtyp.Enum(),
		}
		if vtyp == descriptorpb.FieldDescriptorProto_TYPE_MESSAGE {
			vf.TypeName = proto.String("." + string(parent) + "." + dp.NestedType[len(dp.NestedType)-1].GetName())
		}
		ep.Field = append(ep.Field, vf)
		dp.NestedType = append(dp.NestedType, ep)
		fp.Label = descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum()
		fp.Type = descriptorpb.FieldDescriptorProto_TYPE_MESSAGE.Enum()
		fp.TypeName = proto.String("." + string(efull))
		dp.Field = append(dp.Field, fp)
		return nil
	}
	typ, err := b.scalar(dp, parent, t)
	if err != nil {
		return err
	}
	fp.Type = typ.Enum()
	if typ == descriptorpb.FieldDescriptorProto_TYPE_MESSAGE {
		fp.TypeName = proto.String("." + string(parent) + "." + dp.NestedType[len(dp.NestedType)-1].GetName())
	}
	dp.Field = append(dp.Field, fp)
	return nil
}

// scalar returns the protobuf type of a single value of Go type t (no
// pointer); for a struct it appends the nested message to dp.
func (b *goBuilder) scalar(dp *descriptorpb.DescriptorProto, parent protoreflect.FullName, t reflect.Type) (descriptorpb.FieldDescriptorProto_Type, error) {
	if t.Implements(textMarshaler) || reflect.PointerTo(t).Implements(textMarshaler) {
		return descriptorpb.FieldDescriptorProto_TYPE_STRING, nil
	}
	switch t.Kind() {
	case reflect.Bool:
		return descriptorpb.FieldDescriptorProto_TYPE_BOOL, nil
	case reflect.Int8, reflect.Int16, reflect.Int32:
		return descriptorpb.FieldDescriptorProto_TYPE_INT32, nil
	case reflect.Int, reflect.Int64:
		return descriptorpb.FieldDescriptorProto_TYPE_INT64, nil
	case reflect.Uint8, reflect.Uint16, reflect.Uint32:
		return descriptorpb.FieldDescriptorProto_TYPE_UINT32, nil
	case reflect.Uint, reflect.Uint64, reflect.Uintptr:
		return descriptorpb.FieldDescriptorProto_TYPE_UINT64, nil
	case reflect.Float32:
		return descriptorpb.FieldDescriptorProto_TYPE_FLOAT, nil
	case reflect.Float64:
		return descriptorpb.FieldDescriptorProto_TYPE_DOUBLE, nil
	case reflect.String:
		return descriptorpb.FieldDescriptorProto_TYPE_STRING, nil
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return descriptorpb.FieldDescriptorProto_TYPE_BYTES, nil
		}
	case reflect.Struct:
		base := t.Name()
		if base == "" {
			base = "Anon"
		}
		name := protoreflect.Name(protoIdent(camel(base)))
		for i := 2; hasNested(dp, name); i++ {
			name = protoreflect.Name(fmt.Sprintf("%s_%d", protoIdent(camel(base)), i))
		}
		nested, err := b.message(t, name, parent.Append(name))
		if err != nil {
			return 0, err
		}
		dp.NestedType = append(dp.NestedType, nested)
		return descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, nil
	}
	return 0, fmt.Errorf("unsupported type %s", t)
}

func hasNested(dp *descriptorpb.DescriptorProto, n protoreflect.Name) bool {
	for _, m := range dp.NestedType {
		if m.GetName() == string(n) {
			return true
		}
	}
	return false
}

// camel upper-cases the first letter and each letter after '_', dropping
// the '_', as protoc names map entries.
func camel(s string) string {
	var sb strings.Builder
	up := true
	for _, r := range s {
		if r == '_' {
			up = true
			continue
		}
		if up {
			r = unicode.ToUpper(r)
			up = false
		}
		sb.WriteRune(r)
	}
	return sb.String()
}
