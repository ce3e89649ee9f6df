package gateway

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/internal/benchpb"
)

// benchValues are the requests of the Go-types benchmarks: benchpb.Plain
// (the 581-byte benchmark message as a Go struct) and a GTAll with every
// kind of field and 100-element lists.
func benchValues() []struct {
	name string
	v    any
} {
	return []struct {
		name string
		v    any
	}{
		{"plain", benchpb.NewPlain()},
		{"all", &GTAll{Name: "name", Small: -3, U8: 200, Big: 1 << 40, F64: 1.5, On: true, Raw: []byte("raw"),
			Tags: []string{"a", "b"}, Nums: make([]int, 100), Inner: GTInner{1, 2}, Ptr: &GTInner{3, 4},
			List: make([]GTInner, 100), Count: map[string]int{"a": 1, "b": 2}, ByID: map[int32]*GTInner{7: {5, 6}}}},
	}
}

// BenchmarkGoTypesDecode decodes the gRPC request of a Go-typed method
// into a new argument as Server.Invoke does: "wire" with the gateway's
// codec (goCodec.Unmarshal), "json" by the former path (protobuf-go into
// dynamicpb, the field-by-field copy into Go, encoding/json, and the JSON
// codec into the argument; without the former decode-cost scan):
//
//	go test -run '^$' -bench GoTypes -benchmem ./gateway/
func BenchmarkGoTypesDecode(b *testing.B) {
	for _, c := range benchValues() {
		t := reflect.TypeOf(c.v).Elem()
		m, err := goMessageOf(t)
		if err != nil {
			b.Fatal(err)
		}
		body, err := m.encode(c.v)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name+"/wire", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				gc := &goCodec{args: m, reply: m, limit: 32 << 20, maxDepth: 100}
				if err := gc.Unmarshal(body, reflect.New(t).Interface()); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/json", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				v, err := m.decode(body)
				if err != nil {
					b.Fatal(err)
				}
				js, err := json.Marshal(v)
				if err != nil {
					b.Fatal(err)
				}
				if err := (codec.JSONCodec{}).Unmarshal(js, reflect.New(t).Interface()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGoTypesEncode encodes a Go-typed method's reply into the gRPC
// message as Server.Invoke and the gateway do: "wire" with goCodec
// (codec.MarshalAppend), "json" by the former path (the JSON codec,
// encoding/json into a new reply value, the copy into dynamicpb and
// protobuf-go).
func BenchmarkGoTypesEncode(b *testing.B) {
	for _, c := range benchValues() {
		t := reflect.TypeOf(c.v).Elem()
		m, err := goMessageOf(t)
		if err != nil {
			b.Fatal(err)
		}
		gc := &goCodec{args: m, reply: m}
		b.Run(c.name+"/wire", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := codec.MarshalAppend(gc, nil, c.v); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/json", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				js, err := codec.MarshalAppend(codec.JSONCodec{}, nil, c.v)
				if err != nil {
					b.Fatal(err)
				}
				v := reflect.New(t)
				if err := json.Unmarshal(js, v.Interface()); err != nil {
					b.Fatal(err)
				}
				if _, err := m.encode(v.Interface()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
