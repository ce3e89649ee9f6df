package codec

import (
	"bytes"
	"encoding/gob"
	"errors"
	"fmt"
	"reflect"
)

// GobCodec is the codec registered under Gob. It uses encoding/gob from the
// standard library, and every payload is one complete, self-describing gob
// stream holding one value: type definitions first, then the value. Each
// Marshal uses a new gob.Encoder and each Unmarshal a new gob.Decoder, so
// no type state is shared between calls or connections; this costs the
// type definitions on every payload, but lets any payload be decoded
// alone, in any order. Concrete types sent in interface fields must be
// registered with gob.Register. gob omits zero-valued fields, so decoding
// into a reused value keeps the old values of fields that are zero in the
// payload.
//
// Unmarshal first checks that every message length in the stream fits in
// data and that nothing follows the value. gob still preallocates up to
// about 10 MB for a slice whose length prefix is a lie. It implements
// Appender. The zero value is ready to use and safe for concurrent use.
type GobCodec struct{}

// Name returns "gob".
func (GobCodec) Name() string { return "gob" }

// Marshal returns a gob stream holding v.
func (c GobCodec) Marshal(v any) ([]byte, error) {
	return c.MarshalAppend(nil, v)
}

// MarshalAppend appends a gob stream holding v to dst. On error dst is
// returned unchanged.
func (GobCodec) MarshalAppend(dst []byte, v any) (out []byte, err error) {
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && rv.IsNil() {
		// gob panics on these.
		return dst, fmt.Errorf("codec gob: cannot encode nil pointer of type %T", v)
	}
	defer recoverTo(&err, "gob")
	w := &appendBuf{b: dst}
	if err := gob.NewEncoder(w).Encode(v); err != nil {
		return dst, fmt.Errorf("codec gob: %w", err)
	}
	return w.b, nil
}

// Unmarshal decodes the gob stream in data into v, a non-nil pointer.
func (c GobCodec) Unmarshal(data []byte, v any) (err error) {
	defer recoverTo(&err, "gob")
	if err := checkTarget(c.Name(), v); err != nil {
		return err
	}
	if err := validGob(data); err != nil {
		return fmt.Errorf("codec gob: %w", err)
	}
	r := bytes.NewReader(data)
	if err := gob.NewDecoder(r).Decode(v); err != nil {
		return fmt.Errorf("codec gob: %w", err)
	}
	if r.Len() != 0 {
		return fmt.Errorf("codec gob: %w", errTrailing)
	}
	return nil
}

var errGobLength = errors.New("message length exceeds payload")

// validGob checks the framing of a gob stream: a sequence of messages, each
// an unsigned length (gob's encoding: one byte below 128, else the negated
// byte count followed by big-endian bytes) and that many bytes.
func validGob(b []byte) error {
	if len(b) == 0 {
		return errGobLength
	}
	for len(b) > 0 {
		c := b[0]
		b = b[1:]
		n := uint64(c)
		if c >= 0x80 {
			size := 256 - int(c) // the byte is -size as an int8
			if size > 8 || size > len(b) {
				return errGobLength
			}
			n = 0
			for _, x := range b[:size] {
				n = n<<8 | uint64(x)
			}
			b = b[size:]
		}
		if n == 0 || n > uint64(len(b)) {
			return errGobLength
		}
		b = b[n:]
	}
	return nil
}
