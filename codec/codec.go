package codec

import (
	"fmt"
	"sync/atomic"
)

// Codec encodes call arguments and replies into payload bytes and back.
// Implementations are safe for concurrent use.
type Codec interface {
	// Name is a short lowercase identifier, such as "protobuf".
	Name() string
	// Marshal encodes v.
	Marshal(v any) ([]byte, error)
	// Unmarshal decodes data into v, which is a non-nil pointer. It must
	// not retain data: the caller reuses the buffer.
	Unmarshal(data []byte, v any) error
}

// Appender is implemented by codecs that can encode straight into a
// caller's buffer, saving a copy on the hot path.
type Appender interface {
	// MarshalAppend appends the encoding of v to dst and returns the
	// extended slice.
	MarshalAppend(dst []byte, v any) ([]byte, error)
}

// ID is the one-byte codec identifier carried in every frame header.
type ID byte

// The built-in codec IDs. IDs 0–31 are reserved for Fleet; applications
// register their own codecs at 32–255.
const (
	Raw      ID = 0 // []byte / *[]byte passed through unchanged
	JSON     ID = 1 // encoding/json
	Protobuf ID = 2 // google.golang.org/protobuf, proto.Message values
	MsgPack  ID = 3 // github.com/vmihailenco/msgpack/v5
	Gob      ID = 4 // encoding/gob, one self-describing stream per value
	Gencode  ID = 5 // gencode's generated Size/Marshal/Unmarshal (GencodeMessage)
)

var table [256]atomic.Pointer[Codec]

// Register makes c available under id, replacing any codec registered there.
// It is safe to call concurrently with Get, but is meant for init time.
func Register(id ID, c Codec) { table[id].Store(&c) }

// Get returns the codec registered under id, or nil. It does not allocate.
func Get(id ID) Codec {
	if p := table[id].Load(); p != nil {
		return *p
	}
	return nil
}

// MarshalAppend appends the encoding of v by c to dst, using c's Appender
// when it has one.
func MarshalAppend(c Codec, dst []byte, v any) ([]byte, error) {
	if a, ok := c.(Appender); ok {
		return a.MarshalAppend(dst, v)
	}
	b, err := c.Marshal(v)
	if err != nil {
		return dst, err
	}
	return append(dst, b...), nil
}

// ErrUnsupported formats the error a codec returns for a value type it
// cannot encode.
func ErrUnsupported(codec string, v any) error {
	return fmt.Errorf("codec %s: unsupported type %T", codec, v)
}
