package codec

import (
	"fmt"
	"math"
	"slices"
)

// GencodeMessage is the method set gencode (github.com/andyleap/gencode)
// generates for every struct of a schema, and the whole contract
// GencodeCodec relies on:
//
//   - Size returns the encoded length in bytes;
//   - Marshal encodes into buf's capacity when it holds Size bytes (into a
//     new slice otherwise) and returns the encoding;
//   - Unmarshal decodes from the start of buf and returns the number of
//     bytes it read.
//
// Fleet does not depend on gencode: any type with these methods works.
type GencodeMessage interface {
	Size() uint64
	Marshal(buf []byte) ([]byte, error)
	Unmarshal(buf []byte) (uint64, error)
}

// GencodeCodec is the codec registered under Gencode. It encodes values
// with the methods gencode generates (GencodeMessage, implemented by
// pointers to generated structs) in gencode's binary format: fields in
// schema order, no tags or names, varint lengths. Both sides must use the
// same schema. Values without those methods yield an error built on
// ErrUnsupported.
//
// Marshal and MarshalAppend encode into a buffer of exactly Size bytes.
// Unmarshal fails, with an error naming the codec, when the input is
// truncated (the generated code then indexes past the end: the panic is
// recovered), when it does not consume the input exactly, or when the
// generated method reports an error; the target is then partly written.
// A panic in a generated method while encoding (a nil pointer) is also
// returned as an error. Unmarshal does not retain data: gencode copies
// strings and byte slices out of its input.
//
// gencode's generated Unmarshal trusts its length prefixes: it allocates a
// slice of the announced number of elements before checking that the
// input holds them, so a payload of a few bytes can make it allocate
// memory in proportion to a length it states (a slice of uint64 announced
// with 2^27 elements is 1 GiB), which neither the frame limit nor the
// server's memory budget sees. Use this codec between peers that trust
// each other, or for schemas without slices; protobuf bounds every length
// by the input it has.
//
// It implements Appender. The zero value is ready to use and safe for
// concurrent use (each call uses only its arguments).
type GencodeCodec struct{}

// Name returns "gencode".
func (GencodeCodec) Name() string { return "gencode" }

// Marshal returns the gencode encoding of v, which must implement
// GencodeMessage.
func (c GencodeCodec) Marshal(v any) ([]byte, error) {
	return c.MarshalAppend(nil, v)
}

// MarshalAppend appends the gencode encoding of v to dst: it grows dst by
// Size bytes and lets the generated Marshal write into that space. On error
// dst is returned unchanged.
func (c GencodeCodec) MarshalAppend(dst []byte, v any) (out []byte, err error) {
	m, ok := v.(GencodeMessage)
	if !ok {
		return dst, c.notMessage(v)
	}
	defer func() {
		if p := recover(); p != nil {
			out, err = dst, fmt.Errorf("codec gencode: encoding %T: %v", v, p)
		}
	}()
	size := m.Size()
	if size > math.MaxInt32 {
		return dst, fmt.Errorf("codec gencode: %T encodes to %d bytes", v, size)
	}
	n := int(size)
	dst = slices.Grow(dst, n)
	b, err := m.Marshal(dst[len(dst) : len(dst)+n])
	if err != nil {
		return dst, fmt.Errorf("codec gencode: %w", err)
	}
	if len(b) != n {
		return dst, fmt.Errorf("codec gencode: %T: Marshal wrote %d bytes, Size said %d", v, len(b), n)
	}
	if n > 0 && &b[0] != &dst[:len(dst)+1][len(dst)] {
		// The generated code wrote elsewhere (it does not when the
		// capacity suffices, but the contract does not promise it).
		return append(dst, b...), nil
	}
	return dst[:len(dst)+n], nil
}

// Unmarshal decodes data into v, which must implement GencodeMessage (a
// non-nil pointer to a generated struct). All of data must be consumed.
func (c GencodeCodec) Unmarshal(data []byte, v any) (err error) {
	m, ok := v.(GencodeMessage)
	if !ok {
		return c.notMessage(v)
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("codec gencode: malformed %d-byte payload for %T: %v", len(data), v, p)
		}
	}()
	n, err := m.Unmarshal(data)
	if err != nil {
		return fmt.Errorf("codec gencode: %w", err)
	}
	if n != uint64(len(data)) {
		return fmt.Errorf("codec gencode: %T read %d of %d bytes", v, n, len(data))
	}
	return nil
}

func (c GencodeCodec) notMessage(v any) error {
	return fmt.Errorf("%w (want gencode's generated Size, Marshal and Unmarshal methods)", ErrUnsupported(c.Name(), v))
}
