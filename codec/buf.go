package codec

import (
	"errors"
	"fmt"
	"reflect"
)

// appendBuf is an io.Writer and io.ByteWriter that appends to b. Encoders
// write through it straight into a caller's buffer.
type appendBuf struct{ b []byte }

func (w *appendBuf) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

func (w *appendBuf) WriteByte(c byte) error {
	w.b = append(w.b, c)
	return nil
}

func (w *appendBuf) WriteString(s string) (int, error) {
	w.b = append(w.b, s...)
	return len(s), nil
}

// checkTarget returns an error unless v is a non-nil pointer, the only kind
// of value an Unmarshal can decode into. Codecs whose library already
// reports this clearly do not call it.
func checkTarget(codec string, v any) error {
	if v == nil {
		return fmt.Errorf("codec %s: Unmarshal into nil", codec)
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer {
		return fmt.Errorf("codec %s: Unmarshal into non-pointer %T", codec, v)
	}
	if rv.IsNil() {
		return fmt.Errorf("codec %s: Unmarshal into nil %T", codec, v)
	}
	return nil
}

var errTrailing = errors.New("trailing data after value")

// recoverTo turns a panic in a third-party or standard encoder into an
// error stored in *err, so that no panic escapes a codec.
func recoverTo(err *error, codec string) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("codec %s: panic: %v", codec, r)
	}
}
