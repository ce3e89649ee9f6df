package gateway

import (
	"fmt"
	"net/netip"
	"reflect"
	"testing"
	"time"
)

// goTypeFields are the field types FuzzGoTypes builds structs from: the
// kinds the Go-type mapping covers, and some it refuses.
var goTypeFields = []reflect.Type{
	reflect.TypeFor[int8](), reflect.TypeFor[uint16](), reflect.TypeFor[int](), reflect.TypeFor[uint64](),
	reflect.TypeFor[float32](), reflect.TypeFor[float64](), reflect.TypeFor[bool](), reflect.TypeFor[string](),
	reflect.TypeFor[[]byte](), reflect.TypeFor[[]string](), reflect.TypeFor[[2]int8](), reflect.TypeFor[*int](),
	reflect.TypeFor[**string](), reflect.TypeFor[map[string]int](), reflect.TypeFor[map[int8]string](),
	reflect.TypeFor[map[uint16]*GTInner](), reflect.TypeFor[time.Time](), reflect.TypeFor[time.Duration](),
	reflect.TypeFor[netip.Addr](), reflect.TypeFor[GTInner](), reflect.TypeFor[*GTInner](),
	reflect.TypeFor[[]GTInner](), reflect.TypeFor[[]*GTInner](), reflect.TypeFor[map[string][]byte](),
	// Refused by the mapping.
	reflect.TypeFor[map[bool]int](), reflect.TypeFor[any](), reflect.TypeFor[chan int](),
	reflect.TypeFor[[][]int](), reflect.TypeFor[complex64](), reflect.TypeFor[map[string][]int](),
}

// goTypeTags are the json tags FuzzGoTypes gives the fields: none, names
// that are and are not protobuf identifiers, names two fields can share,
// and the "-" and option forms.
var goTypeTags = []string{
	"", `json:"a"`, `json:"A"`, `json:"a_b"`, `json:"a-b"`, `json:"-"`, `json:"-,"`,
	`json:"x,omitempty"`, `json:",string"`, `json:"1x"`, `json:"é"`, `json:"F0"`, `json:"value"`,
	`json:"a\"b"`, `json:"a\\b,omitempty"`, // names encoding/json rejects: the Go name
}

// goTypeOf builds the struct type spec describes: two bytes a field, the
// field's type and its tag (indexes into goTypeFields and goTypeTags).
// An odd byte left over makes the type that field's type alone (a
// wrapped non-struct type) when there are no fields.
func goTypeOf(spec []byte) reflect.Type {
	var fields []reflect.StructField
	for i := 0; i+1 < len(spec) && len(fields) < 16; i += 2 {
		fields = append(fields, reflect.StructField{
			Name: fmt.Sprintf("F%d", len(fields)),
			Type: goTypeFields[int(spec[i])%len(goTypeFields)],
			Tag:  reflect.StructTag(goTypeTags[int(spec[i+1])%len(goTypeTags)]),
		})
	}
	if len(fields) == 0 {
		if len(spec) == 1 {
			return goTypeFields[int(spec[0])%len(goTypeFields)]
		}
		return reflect.TypeFor[struct{}]()
	}
	return reflect.StructOf(fields)
}

// FuzzGoTypes synthesizes the protobuf message of arbitrary Go types
// (structs built with reflect.StructOf from up to 16 fields of the
// mapping's kinds, refused kinds and json tags, or a lone type wrapped in
// "value") and decodes arbitrary bytes with it, as a Go-typed gRPC call
// does. It asserts: no panic; a type either has a message or an error;
// the wire codec agrees with the reference (protobuf-go into dynamicpb,
// then the field-by-field copy) and what it decodes encodes back to
// bytes both decode to the same value (checkWire). The seed corpus is in
// testdata/fuzz/FuzzGoTypes.
func FuzzGoTypes(f *testing.F) {
	f.Add([]byte{0, 1, 5, 2, 7, 0}, []byte("\x08\x7f\x11\x00\x00\x00\x00\x00\x00\xf0?\x1a\x01x"))
	f.Add([]byte{13, 3, 13, 4}, []byte("\n\x05\n\x01k\x10\x01"))
	f.Add([]byte{24, 0}, []byte(""))
	f.Add([]byte{16}, []byte("\n\x142026-11-25T17:00:00Z"))
	f.Add([]byte{1, 1, 2, 2}, []byte("\x08\x01"))
	f.Fuzz(func(t *testing.T, spec, msg []byte) {
		typ := goTypeOf(spec)
		m, err := goMessageOf(typ)
		if err != nil {
			if m != nil {
				t.Fatalf("%s: a message and an error %v", typ, err)
			}
			return
		}
		checkWire(t, m, msg, 1<<30)
	})
}
