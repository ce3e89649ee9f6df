package codec

import (
	"bytes"
	"fmt"
)

// RawCodec is the codec registered under Raw. It passes byte slices through
// unchanged: Marshal accepts a []byte or a non-nil *[]byte, and Unmarshal
// accepts a non-nil *[]byte, which it sets to a new copy of the payload (the
// caller reuses the payload buffer, so it is never aliased). Any other type
// yields the ErrUnsupported error. It implements Appender. The zero value is
// ready to use and safe for concurrent use.
type RawCodec struct{}

// Name returns "raw".
func (RawCodec) Name() string { return "raw" }

// Marshal returns v itself when v is a []byte, or *v when v is a *[]byte;
// it does not copy.
func (c RawCodec) Marshal(v any) ([]byte, error) {
	switch b := v.(type) {
	case []byte:
		return b, nil
	case *[]byte:
		if b == nil {
			return nil, fmt.Errorf("codec raw: Marshal of nil %T", v)
		}
		return *b, nil
	}
	return nil, ErrUnsupported(c.Name(), v)
}

// MarshalAppend appends the bytes Marshal would return to dst.
func (c RawCodec) MarshalAppend(dst []byte, v any) ([]byte, error) {
	b, err := c.Marshal(v)
	if err != nil {
		return dst, err
	}
	return append(dst, b...), nil
}

// Unmarshal sets *v to a copy of data; v must be a non-nil *[]byte. An empty
// non-nil data gives an empty non-nil slice, a nil data gives nil.
func (c RawCodec) Unmarshal(data []byte, v any) error {
	p, ok := v.(*[]byte)
	if !ok {
		return ErrUnsupported(c.Name(), v)
	}
	if p == nil {
		return fmt.Errorf("codec raw: Unmarshal into nil %T", v)
	}
	*p = bytes.Clone(data)
	return nil
}
