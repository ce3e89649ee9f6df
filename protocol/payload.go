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
// as it is. Call it before EndFrame; AppendMessage does.
//
// It fails with InvalidArgument when no compressor is registered under id,
// and with Internal wrapping the compressor's error; buf is then
// unchanged.
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
	if err != nil {
		return buf, fleet.Errorf(fleet.Internal, "protocol: compress payload with %s: %w", comp.Name(), err)
	}
	return buf, nil
}

// DecompressPayload returns f's payload, decompressed when f has
// FlagCompressed, into at most maxSize bytes (0 means
// DefaultMaxDecompressedSize): DecompressRoom, then decompression within
// that room. The second result, when not nil, is the pooled buffer that
// holds the decompressed bytes: give it back (bufpool) once the payload is
// decoded, or drop it. DecodeMessage does both steps and the decoding.
//
// It fails as DecompressRoom and DecodeMessage do: InvalidArgument for an
// unknown compressor or malformed input, ResourceExhausted (wrapping
// compress.ErrTooLarge) for a payload over maxSize.
func DecompressPayload(f *Frame, maxSize int) ([]byte, *[]byte, error) {
	if f.Flags&FlagCompressed == 0 {
		return f.Payload, nil, nil
	}
	room, err := DecompressRoom(f, maxSize)
	if err != nil {
		return nil, nil, err
	}
	return decompressInto(f, room)
}
