package protocol

import (
	"errors"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/compress"
	"github.com/fleetrpc/fleet/internal/bufpool"
)

// A message is a frame whose payload is a value encoded with a codec and,
// above a size, compressed: requests, responses and stream messages.
// AppendMessage builds one and DecompressRoom and DecodeMessage read one;
// client and server use them for calls and streams alike, so that every
// route encodes, compresses, limits and decodes the same way, with one
// error mapping:
//
//	codec not registered, compressor not registered  InvalidArgument
//	the codec fails to encode, the compressor fails  Internal
//	frame over MaxFrame, payload over its room        ResourceExhausted (wraps ErrTooLarge, compress.ErrTooLarge)
//	payload does not decompress or decode             InvalidArgument
//
// Every error is a *fleet.Error; the codec's or compressor's own error is
// among its causes (errors.Is, errors.As).

// Message describes the frame AppendMessage builds around a value. The
// zero value of each field is valid except Codec. A Message is a plain
// value: build one on the stack per frame.
type Message struct {
	// Header is the frame's fixed header. Its Codec must be Codec's ID;
	// FlagCompressed and Compression are set by AppendMessage when it
	// compresses the payload.
	Header
	// Service and Method name the call (requests and stream opens only).
	Service, Method string
	// Metadata and Pairs are the frame's metadata, written as BeginFrame
	// writes md and kv.
	Metadata fleet.Metadata
	Pairs    []string
	// Codec encodes the value.
	Codec codec.Codec
	// Compression compresses payloads of at least CompressMin bytes;
	// compress.None never compresses. A compressed payload that is not
	// smaller than the original is sent uncompressed.
	Compression compress.ID
	CompressMin int
	// MaxFrame caps the frame's size after its length prefix, in bytes;
	// 0 means DefaultMaxFrameSize.
	MaxFrame int
}

// Span locates a frame appended by AppendMessage in the returned buffer:
// it starts at Start (where SetFlags and SetCompressed take it) and its
// payload at Payload, running to the end of the buffer.
type Span struct{ Start, Payload int }

// AppendMessage appends to dst a whole frame carrying v encoded with
// m.Codec: the header, names and metadata (BeginFrame), the encoding of v
// (codec.MarshalAppend, straight into the buffer), its compression when
// m.Compression is set and the payload has at least m.CompressMin bytes
// (CompressPayload), and the length prefix checked against m.MaxFrame
// (EndFrame). It allocates nothing beyond growing dst and what the codec
// and compressor allocate.
//
// On error it returns dst's bytes unchanged (possibly in a grown array, so
// that a pooled buffer keeps its growth) with the codes of the table
// above; nothing of the frame may be sent.
func AppendMessage(dst []byte, m *Message, v any) ([]byte, Span, error) {
	n0 := len(dst)
	if m.Codec == nil {
		return dst, Span{}, fleet.Errorf(fleet.InvalidArgument, "protocol: codec %d is not registered", m.Header.Codec)
	}
	buf, start := BeginFrame(dst, &m.Header, m.Service, m.Method, m.Metadata, m.Pairs...)
	p0 := len(buf)
	buf, err := codec.MarshalAppend(m.Codec, buf, v)
	if err != nil {
		return buf[:n0], Span{}, fleet.Errorf(fleet.Internal, "encode %s (%s): %w", contentOf(m.Type), m.Codec.Name(), err)
	}
	if m.Compression != compress.None && len(buf)-p0 >= m.CompressMin {
		if buf, err = CompressPayload(buf, start, p0, m.Compression); err != nil {
			return buf[:n0], Span{}, err
		}
	}
	if err := EndFrame(buf, start, m.MaxFrame); err != nil {
		return buf[:n0], Span{}, err
	}
	return buf, Span{Start: start, Payload: p0}, nil
}

// DecompressRoom returns the most f's payload may decompress to, in bytes:
// 0 when it is not compressed, else the compressor's bound from the
// compressed bytes (compress.DecompressBound, which measures what the
// bytes do not bound), at most limit (0 means
// DefaultMaxDecompressedSize). A receiver reserves that many bytes against
// its memory budget and passes the result to DecodeMessage.
//
// It fails with InvalidArgument when the frame names a compressor that is
// not registered or the payload is malformed, and with ResourceExhausted
// (wrapping compress.ErrTooLarge) when it is known to decompress to more
// than limit bytes.
func DecompressRoom(f *Frame, limit int) (int, error) {
	if f.Flags&FlagCompressed == 0 {
		return 0, nil
	}
	comp := compress.Get(compress.ID(f.Compression))
	if comp == nil {
		return 0, fleet.Errorf(fleet.InvalidArgument, "protocol: unknown compression %d", f.Compression)
	}
	if limit <= 0 {
		limit = DefaultMaxDecompressedSize
	}
	n, err := compress.DecompressBound(comp, f.Payload, limit)
	if err != nil {
		return 0, decompressError(err)
	}
	return n, nil
}

// Unmarshaler decodes data into v with cd. codec.Codec.Unmarshal is one;
// Fleet's streams pass one that skips resetting a new message. It must
// not retain data.
type Unmarshaler func(cd codec.Codec, data []byte, v any) error

// DecodeMessage decodes f's payload into v with the codec the frame names:
// decompressed first, when f has FlagCompressed, into a pooled buffer of
// room bytes (as DecompressRoom returned) that is released before it
// returns, so that the payload never decompresses to more than room.
// unmarshal nil means codec.Codec.Unmarshal.
//
// It fails, with the codes of the table above, with InvalidArgument for
// an unknown codec or compressor and for a payload that does not
// decompress or decode, and with ResourceExhausted when the payload
// decompresses to more than room.
func DecodeMessage(f *Frame, v any, room int, unmarshal Unmarshaler) error {
	cd := codec.Get(codec.ID(f.Codec))
	if cd == nil {
		return fleet.Errorf(fleet.InvalidArgument, "protocol: unknown codec %d", f.Codec)
	}
	if unmarshal == nil {
		unmarshal = codec.Codec.Unmarshal
	}
	payload, bp := f.Payload, (*[]byte)(nil)
	if f.Flags&FlagCompressed != 0 {
		var err error
		if payload, bp, err = decompressInto(f, room); err != nil {
			return err
		}
	}
	err := unmarshal(cd, payload, v)
	bufpool.Put(bp)
	if err != nil {
		return fleet.Errorf(fleet.InvalidArgument, "decode %s (%s): %w", contentOf(f.Type), cd.Name(), err)
	}
	return nil
}

// contentOf names what a message of type t carries, for error messages.
func contentOf(t Type) string {
	switch t {
	case TypeRequest:
		return "arguments"
	case TypeResponse:
		return "reply"
	case TypeStreamData:
		return "stream message"
	}
	return "payload"
}

// decompressInto decompresses f's payload within room bytes into a
// pooled buffer of that size, which the caller gives back.
func decompressInto(f *Frame, room int) ([]byte, *[]byte, error) {
	comp := compress.Get(compress.ID(f.Compression))
	if comp == nil {
		return nil, nil, fleet.Errorf(fleet.InvalidArgument, "protocol: unknown compression %d", f.Compression)
	}
	room = max(room, 0)
	bp := bufpool.Get(room)
	out, err := comp.Decompress((*bp)[:0], f.Payload, room)
	*bp = out
	if err != nil {
		bufpool.Put(bp)
		return nil, nil, decompressError(err)
	}
	return out, bp, nil
}

// decompressError maps a compressor's error: ResourceExhausted for output
// over the limit, InvalidArgument for anything else (malformed input).
func decompressError(err error) error {
	if errors.Is(err, compress.ErrTooLarge) {
		return fleet.Errorf(fleet.ResourceExhausted, "protocol: decompress payload: %w", err)
	}
	return fleet.Errorf(fleet.InvalidArgument, "protocol: decompress payload: %w", err)
}

// AppendStatus appends a whole frame with header h carrying err as a
// status: h.Status is set to err's code (Unknown when err carries none or
// is OK) and the payload is err's message (a *fleet.Error's Message),
// truncated to 64 KiB. A nil err writes status OK and an empty payload.
// When the frame with md is over maxFrame (0 means DefaultMaxFrameSize),
// it appends instead the same status without metadata and with the
// message "status too large", so a status always goes out.
func AppendStatus(dst []byte, h *Header, md fleet.Metadata, err error, maxFrame int) []byte {
	var msg string
	h.Status = 0
	if err != nil {
		h.Status = byte(fleet.CodeOf(err))
		if h.Status == byte(fleet.OK) {
			h.Status = byte(fleet.Unknown)
		}
		msg = err.Error()
		if fe, ok := err.(*fleet.Error); ok {
			msg = fe.Message()
		}
		if len(msg) > 64<<10 {
			msg = msg[:64<<10]
		}
	}
	n0 := len(dst)
	buf, start := BeginFrame(dst, h, "", "", md)
	buf = append(buf, msg...)
	if EndFrame(buf, start, maxFrame) != nil {
		buf, start = BeginFrame(buf[:n0], h, "", "", nil)
		buf = append(buf, "status too large"...)
		_ = EndFrame(buf, start, 0) // a few dozen bytes: under the default limit
	}
	return buf
}
