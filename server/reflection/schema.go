package reflection

import (
	"bytes"
	"encoding"
	"encoding/json"
	"reflect"
	"strings"
	"time"
)

// This file derives a JSON Schema (draft 2020-12,
// https://json-schema.org/draft/2020-12/json-schema-core) from a Go type,
// following the rules encoding/json applies when it encodes and decodes
// the type. It is written here rather than taken from a schema library
// because the core module keeps its requirements few and small; it
// covers what encoding/json does: json tags (name, "-", omitempty,
// string), embedded structs flattened, []byte as base64 strings, maps
// with string, integer or text keys, types with their own MarshalJSON
// or MarshalText. A struct type that contains itself is emitted once
// under $defs and referenced with $ref.

// schema is one JSON Schema node. Properties keep the struct's field
// order, so a reader sees fields as declared.
type schema struct {
	Schema               string             `json:"$schema,omitempty"`
	Ref                  string             `json:"$ref,omitempty"`
	Title                string             `json:"title,omitempty"`
	Description          string             `json:"description,omitempty"`
	Type                 any                `json:"type,omitempty"` // a string, or a list for nullable
	Format               string             `json:"format,omitempty"`
	ContentEncoding      string             `json:"contentEncoding,omitempty"`
	Minimum              *int               `json:"minimum,omitempty"`
	Items                *schema            `json:"items,omitempty"`
	MinItems             *int               `json:"minItems,omitempty"`
	MaxItems             *int               `json:"maxItems,omitempty"`
	Properties           props              `json:"properties,omitempty"`
	AdditionalProperties *schema            `json:"additionalProperties,omitempty"`
	Defs                 map[string]*schema `json:"$defs,omitempty"`
}

type prop struct {
	name string
	s    *schema
}

// props is an ordered object of property schemas.
type props []prop

func (p props) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, x := range p {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(x.name)
		b.Write(k)
		b.WriteByte(':')
		v, err := json.Marshal(x.s)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

var (
	typeOfJSONMarshaler = reflect.TypeFor[json.Marshaler]()
	typeOfTextMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
	typeOfTime          = reflect.TypeFor[time.Time]()
	typeOfRawMessage    = reflect.TypeFor[json.RawMessage]()
)

// schemaGen holds the state of one derivation.
type schemaGen struct {
	stack map[reflect.Type]bool   // struct types being expanded
	defs  map[reflect.Type]string // struct types that recur, by $defs key
}

// jsonSchemaOf returns the JSON Schema of t as JSON text.
func jsonSchemaOf(t reflect.Type) json.RawMessage {
	g := &schemaGen{stack: map[reflect.Type]bool{}, defs: map[reflect.Type]string{}}
	root := g.of(t)
	if len(g.defs) > 0 {
		root.Defs = map[string]*schema{}
		// Expanding a definition may find further recurring types.
		for done := false; !done; {
			done = true
			for dt, key := range g.defs {
				if _, ok := root.Defs[key]; ok {
					continue
				}
				done = false
				g.stack[dt] = true
				root.Defs[key] = g.structSchema(dt)
				delete(g.stack, dt)
			}
		}
	}
	root.Schema = "https://json-schema.org/draft/2020-12/schema"
	if root.Title == "" && t.Name() != "" {
		root.Title = t.String()
	}
	b, err := json.Marshal(root)
	if err != nil {
		return nil
	}
	return b
}

func intPtr(n int) *int { return &n }

// of returns the schema of values of t.
func (g *schemaGen) of(t reflect.Type) *schema {
	if t == typeOfTime {
		return &schema{Type: "string", Format: "date-time"}
	}
	if t == typeOfRawMessage {
		return &schema{Description: "any JSON value"}
	}
	if t.Implements(typeOfJSONMarshaler) || reflect.PointerTo(t).Implements(typeOfJSONMarshaler) {
		return &schema{Description: "JSON encoding of Go type " + t.String() + " (custom MarshalJSON)"}
	}
	if t.Implements(typeOfTextMarshaler) || reflect.PointerTo(t).Implements(typeOfTextMarshaler) {
		return &schema{Type: "string", Description: "text form of Go type " + t.String()}
	}
	switch t.Kind() {
	case reflect.Bool:
		return &schema{Type: "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return &schema{Type: "integer"}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return &schema{Type: "integer", Minimum: intPtr(0)}
	case reflect.Float32, reflect.Float64:
		return &schema{Type: "number"}
	case reflect.String:
		return &schema{Type: "string"}
	case reflect.Pointer:
		return g.of(t.Elem())
	case reflect.Interface:
		return &schema{Description: "any JSON value"}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 && !reflect.PointerTo(t.Elem()).Implements(typeOfTextMarshaler) {
			return &schema{Type: "string", ContentEncoding: "base64"}
		}
		return &schema{Type: "array", Items: g.of(t.Elem())}
	case reflect.Array:
		return &schema{Type: "array", Items: g.of(t.Elem()), MinItems: intPtr(t.Len()), MaxItems: intPtr(t.Len())}
	case reflect.Map:
		k := t.Key()
		switch {
		case k.Kind() == reflect.String, reflect.PointerTo(k).Implements(typeOfTextMarshaler),
			k.Kind() >= reflect.Int && k.Kind() <= reflect.Uintptr:
			return &schema{Type: "object", AdditionalProperties: g.of(t.Elem())}
		}
		return &schema{Description: "Go type " + t.String() + " has no JSON encoding"}
	case reflect.Struct:
		if g.stack[t] {
			key := g.defs[t]
			if key == "" {
				key = strings.NewReplacer("/", "_", "~", "_").Replace(t.String())
				g.defs[t] = key
			}
			return &schema{Ref: "#/$defs/" + key}
		}
		g.stack[t] = true
		defer delete(g.stack, t)
		return g.structSchema(t)
	}
	return &schema{Description: "Go type " + t.String() + " has no JSON encoding"}
}

// structSchema returns the object schema of struct type t.
func (g *schemaGen) structSchema(t reflect.Type) *schema {
	s := &schema{Type: "object", Properties: props{}}
	if t.Name() != "" {
		s.Title = t.String()
	}
	seen := map[string]bool{}
	g.fields(t, s, seen, 0)
	return s
}

// fields adds t's fields to s. Fields of embedded structs come after the
// outer fields' names are known, so an outer field wins a name clash, as
// in encoding/json.
func (g *schemaGen) fields(t reflect.Type, s *schema, seen map[string]bool, depth int) {
	if depth > 8 {
		return
	}
	var embedded []reflect.Type
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			et := ft
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				embedded = append(embedded, et)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if seen[name] {
			continue
		}
		seen[name] = true
		var fs *schema
		if strings.Contains(","+opts+",", ",string,") && isScalar(ft) {
			fs = &schema{Type: "string", Description: "a " + ft.Kind().String() + " in a JSON string"}
		} else {
			fs = g.of(ft)
		}
		s.Properties = append(s.Properties, prop{name, fs})
	}
	for _, et := range embedded {
		g.fields(et, s, seen, depth+1)
	}
}

func isScalar(t reflect.Type) bool {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool, reflect.String, reflect.Float32, reflect.Float64,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return true
	}
	return false
}
