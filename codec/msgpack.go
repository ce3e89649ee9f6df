package codec

import (
	"bytes"
	"errors"
	"fmt"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
)

// MsgPackCodec is the codec registered under MsgPack. It uses
// github.com/vmihailenco/msgpack/v5 with that library's defaults: structs
// are maps keyed by the `msgpack` tag (or the field name), integers keep
// their Go width. The format is the MessagePack specification
// (https://github.com/msgpack/msgpack/blob/master/spec.md).
//
// Unmarshal first checks that data is exactly one well-formed MessagePack
// value, nested at most MaxMsgPackDepth deep, in which no length prefix
// claims more elements or bytes than data holds: the library trusts those
// prefixes when it preallocates slices, so without the check a few bytes
// could make it allocate gigabytes. Unlike msgpack.Unmarshal, it leaves the
// library's UsePreallocateValues off, which starts a never-ending goroutine
// for every pointer type decoded. It implements Appender with a pooled
// encoder that writes straight into the caller's buffer. The zero value is
// ready to use and safe for concurrent use.
type MsgPackCodec struct{}

// MaxMsgPackDepth is how deeply arrays and maps may nest in a payload that
// MsgPackCodec.Unmarshal accepts, the same bound encoding/json applies.
const MaxMsgPackDepth = 10000

// maxPooledPayload is the largest payload after which a decoder, whose
// buffers may have grown to the payload's size, goes back to its pool.
const maxPooledPayload = 64 << 10

// Name returns "msgpack".
func (MsgPackCodec) Name() string { return "msgpack" }

type msgpackEncoder struct {
	w       appendBuf
	enc     *msgpack.Encoder
	scratch []byte // for Marshal, which copies the result out
}

var msgpackEncPool = sync.Pool{New: func() any {
	e := new(msgpackEncoder)
	e.enc = msgpack.NewEncoder(&e.w)
	return e
}}

// Marshal returns the MessagePack encoding of v, in a slice of its own.
func (MsgPackCodec) Marshal(v any) ([]byte, error) {
	e := msgpackEncPool.Get().(*msgpackEncoder)
	e.w.b = e.scratch[:0]
	err := encodeMsgPack(e.enc, v)
	var out []byte
	if err == nil {
		out = bytes.Clone(e.w.b)
	}
	if cap(e.w.b) <= maxPooledPayload {
		e.scratch = e.w.b
	} else {
		e.scratch = nil
	}
	e.w.b = nil
	msgpackEncPool.Put(e)
	if err != nil {
		return nil, fmt.Errorf("codec msgpack: %w", err)
	}
	return out, nil
}

// MarshalAppend appends the MessagePack encoding of v to dst. On error dst
// is returned unchanged.
func (MsgPackCodec) MarshalAppend(dst []byte, v any) (_ []byte, err error) {
	e := msgpackEncPool.Get().(*msgpackEncoder)
	e.w.b = dst
	err = encodeMsgPack(e.enc, v)
	out := e.w.b
	e.w.b = nil
	msgpackEncPool.Put(e)
	if err != nil {
		return dst, fmt.Errorf("codec msgpack: %w", err)
	}
	return out, nil
}

type msgpackDecoder struct {
	r   bytes.Reader
	dec *msgpack.Decoder
}

var msgpackDecPool = sync.Pool{New: func() any {
	d := new(msgpackDecoder)
	d.dec = msgpack.NewDecoder(&d.r)
	return d
}}

// Unmarshal decodes data, which must hold exactly one MessagePack value,
// into v, a non-nil pointer.
func (c MsgPackCodec) Unmarshal(data []byte, v any) error {
	if err := checkTarget(c.Name(), v); err != nil {
		return err
	}
	if err := validMsgPack(data); err != nil {
		return fmt.Errorf("codec msgpack: %w", err)
	}
	d := msgpackDecPool.Get().(*msgpackDecoder)
	d.r.Reset(data)
	// Reset clears the flags, leaving UsePreallocateValues off: unlike
	// msgpack.Unmarshal, which turns it on, this starts no goroutine and
	// keeps no 256 spare values per decoded pointer type.
	d.dec.Reset(&d.r)
	err := decodeMsgPack(d.dec, v)
	d.r.Reset(nil)
	d.dec.Reset(&d.r)
	// The decoder keeps a scratch buffer as large as the longest string it
	// has read; do not pool one that a large payload may have grown.
	if len(data) <= maxPooledPayload {
		msgpackDecPool.Put(d)
	}
	if err != nil {
		return fmt.Errorf("codec msgpack: %w", err)
	}
	return nil
}

// encodeMsgPack and decodeMsgPack turn a panic in the library into an
// error; the encoder or decoder stays usable because Reset clears its state.
func encodeMsgPack(enc *msgpack.Encoder, v any) (err error) {
	defer recoverTo(&err, "msgpack")
	return enc.Encode(v)
}

func decodeMsgPack(dec *msgpack.Decoder, v any) (err error) {
	defer recoverTo(&err, "msgpack")
	return dec.Decode(v)
}

var (
	errMsgPackShort = errors.New("truncated or oversized length")
	errMsgPackCode  = errors.New("invalid type code 0xc1")
	errMsgPackDeep  = errors.New("nesting too deep")
)

// validMsgPack reports whether data is exactly one well-formed MessagePack
// value whose every length prefix fits in the bytes that follow it.
func validMsgPack(data []byte) error {
	rest, err := skipMsgPack(data, 0)
	if err != nil {
		return err
	}
	if len(rest) != 0 {
		return errTrailing
	}
	return nil
}

// skipMsgPack returns b after the first value in it. It does not allocate.
func skipMsgPack(b []byte, depth int) ([]byte, error) {
	if len(b) == 0 {
		return nil, errMsgPackShort
	}
	c := b[0]
	b = b[1:]
	var n, elems int // payload bytes to skip; array items to skip
	switch {
	case c <= 0x7f || c >= 0xe0: // positive and negative fixint
		return b, nil
	case c <= 0x8f: // fixmap
		elems = 2 * int(c&0x0f)
	case c <= 0x9f: // fixarray
		elems = int(c & 0x0f)
	case c <= 0xbf: // fixstr
		n = int(c & 0x1f)
	default:
		switch c {
		case 0xc0, 0xc2, 0xc3: // nil, false, true
			return b, nil
		case 0xc1:
			return nil, errMsgPackCode
		case 0xc4, 0xd9: // bin8, str8
			return skipLen(b, 1, 0)
		case 0xc5, 0xda: // bin16, str16
			return skipLen(b, 2, 0)
		case 0xc6, 0xdb: // bin32, str32
			return skipLen(b, 4, 0)
		case 0xc7: // ext8: length, type, data
			return skipLen(b, 1, 1)
		case 0xc8: // ext16
			return skipLen(b, 2, 1)
		case 0xc9: // ext32
			return skipLen(b, 4, 1)
		case 0xca, 0xce, 0xd2: // float32, uint32, int32
			n = 4
		case 0xcb, 0xcf, 0xd3: // float64, uint64, int64
			n = 8
		case 0xcc, 0xd0: // uint8, int8
			n = 1
		case 0xcd, 0xd1: // uint16, int16
			n = 2
		case 0xd4: // fixext1: type, 1 byte
			n = 2
		case 0xd5: // fixext2
			n = 3
		case 0xd6: // fixext4
			n = 5
		case 0xd7: // fixext8
			n = 9
		case 0xd8: // fixext16
			n = 17
		case 0xdc, 0xde: // array16, map16
			if len(b) < 2 {
				return nil, errMsgPackShort
			}
			elems = int(b[0])<<8 | int(b[1])
			b = b[2:]
		case 0xdd, 0xdf: // array32, map32
			if len(b) < 4 {
				return nil, errMsgPackShort
			}
			elems = int(b[0])<<24 | int(b[1])<<16 | int(b[2])<<8 | int(b[3])
			b = b[4:]
		}
		if c == 0xde || c == 0xdf {
			elems *= 2
		}
	}
	if n > len(b) {
		return nil, errMsgPackShort
	}
	b = b[n:]
	if elems == 0 {
		return b, nil
	}
	// Every element takes at least one byte.
	if elems > len(b) {
		return nil, errMsgPackShort
	}
	if depth >= MaxMsgPackDepth {
		return nil, errMsgPackDeep
	}
	var err error
	for range elems {
		if b, err = skipMsgPack(b, depth+1); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// skipLen skips a length prefix of size bytes, then extra bytes (an
// extension's type), then as many bytes as the prefix says.
func skipLen(b []byte, size, extra int) ([]byte, error) {
	if len(b) < size {
		return nil, errMsgPackShort
	}
	n := 0
	for _, x := range b[:size] {
		n = n<<8 | int(x)
	}
	b = b[size:]
	if n+extra > len(b) {
		return nil, errMsgPackShort
	}
	return b[n+extra:], nil
}
