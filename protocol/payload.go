package protocol

import (
	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/compress"
	"github.com/fleetrpc/fleet/internal/bufpool"
)

// Offsets of the header fields inside an encoded frame, counted from the
// start of its length prefix (docs/protocol.md has the diagram).
const (
	offFlags       = PrefixSize + 4
	offCompression = PrefixSize + 6
)

// ControlFrameSize is the size in bytes of a control frame without a
// payload built by AppendControl (the header and three empty varints), so
// a [ControlFrameSize]byte array on the stack holds one without allocating.
const ControlFrameSize = HeaderSize + 3

// SetCompressed marks the encoded frame that starts at start in buf as
// carrying a payload compressed with compressor id: it sets FlagCompressed
// and the Compression field of its header in place.
func SetCompressed(buf []byte, start int, id compress.ID) {
	SetFlags(buf, start, FlagCompressed)
	buf[start+offCompression] = byte(id)
}

// SetFlags sets flag bits in the header of the encoded frame that starts
// at start in buf, in place.
func SetFlags(buf []byte, start int, f Flags) {
	buf[start+offFlags] |= byte(f)
}

// CompressPayload compresses the payload of the frame being built in buf:
// the frame starts at start (as BeginFrame returned) and its payload is
// buf[payload:]. When the compressed form is smaller it replaces the
// payload and the header is marked (SetCompressed); otherwise buf is left
// as it is. Call it before EndFrame.
//
// It fails with InvalidArgument when no compressor is registered under id,
// and with the compressor's error; buf is then unchanged. Client and server
// share it for requests and responses.
func CompressPayload(buf []byte, start, payload int, id compress.ID) ([]byte, error) {
	comp := compress.Get(id)
	if comp == nil {
		return buf, fleet.Errorf(fleet.InvalidArgument, "protocol: compression %d is not registered", id)
	}
	tp := bufpool.Get(len(buf) - payload)
	out, err := comp.Compress((*tp)[:0], buf[payload:])
	if err == nil && len(out) < len(buf)-payload {
		buf = append(buf[:payload], out...)
		SetCompressed(buf, start, id)
	}
	*tp = out
	bufpool.Put(tp)
	return buf, err
}

// DecompressPayload returns f's payload, decompressed when f has
// FlagCompressed, into at most maxSize bytes (0 means
// DefaultMaxDecompressedSize). The second result, when not nil, is the
// pooled buffer that holds the decompressed bytes: Fleet's client and
// server give it back once the payload is decoded; other callers may drop
// it.
//
// It fails with InvalidArgument when the frame names a compressor that is
// not registered, and with ResourceExhausted when the payload does not
// decompress within maxSize bytes (or is corrupt). Client and server share
// it for responses and requests.
func DecompressPayload(f *Frame, maxSize int) ([]byte, *[]byte, error) {
	if f.Flags&FlagCompressed == 0 {
		return f.Payload, nil, nil
	}
	comp := compress.Get(compress.ID(f.Compression))
	if comp == nil {
		return nil, nil, fleet.Errorf(fleet.InvalidArgument, "protocol: unknown compression %d", f.Compression)
	}
	if maxSize <= 0 {
		maxSize = DefaultMaxDecompressedSize
	}
	// Start from the bound the compressed bytes give (capped by maxSize)
	// when the compressor knows one, else small: the buffer grows as
	// output arrives, so a payload that claims much and delivers little
	// costs little, and nothing is allocated past maxSize.
	first := min(maxSize, 64<<10)
	if n, err := compress.DecompressBound(comp, f.Payload, maxSize); err == nil {
		first = min(n, maxSize)
	}
	bp := bufpool.Get(first)
	out, err := comp.Decompress((*bp)[:0], f.Payload, maxSize)
	*bp = out
	if err != nil {
		bufpool.Put(bp)
		return nil, nil, fleet.Errorf(fleet.ResourceExhausted, "protocol: decompress payload: %w", err)
	}
	return out, bp, nil
}
