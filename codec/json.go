package codec

import (
	"encoding/json"
	"sync"
)

// JSONCodec is the codec registered under JSON. It uses encoding/json from
// the standard library, so the usual struct tags and the json.Marshaler and
// json.Unmarshaler interfaces apply; HTML characters are escaped as by
// json.Marshal. Generated protobuf messages are encoded as plain Go structs,
// not in the canonical protobuf JSON mapping (protojson). Unmarshal rejects
// trailing data and nesting deeper than encoding/json allows. It implements
// Appender, encoding through a pooled json.Encoder straight into the
// caller's buffer. The zero value is ready to use and safe for concurrent
// use.
type JSONCodec struct{}

// Name returns "json".
func (JSONCodec) Name() string { return "json" }

// Marshal returns the encoding/json encoding of v.
func (JSONCodec) Marshal(v any) ([]byte, error) { return json.Marshal(v) }

// Unmarshal decodes data into v with json.Unmarshal. v must be a non-nil
// pointer.
func (JSONCodec) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

type jsonEncoder struct {
	w   appendBuf
	enc *json.Encoder
}

var jsonPool = sync.Pool{New: func() any {
	e := new(jsonEncoder)
	e.enc = json.NewEncoder(&e.w)
	return e
}}

// MarshalAppend appends the encoding/json encoding of v to dst; the bytes
// are the same as Marshal's. On error dst is returned unchanged.
func (JSONCodec) MarshalAppend(dst []byte, v any) ([]byte, error) {
	e := jsonPool.Get().(*jsonEncoder)
	e.w.b = dst
	err := e.enc.Encode(v)
	out := e.w.b
	e.w.b = nil
	jsonPool.Put(e)
	if err != nil {
		return dst, err
	}
	// json.Encoder ends every value with a newline that Marshal does not
	// write.
	return out[:len(out)-1], nil
}
