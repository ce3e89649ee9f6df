package protocol_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/compress"
	"github.com/fleetrpc/fleet/internal/bufpool"
	"github.com/fleetrpc/fleet/protocol"
)

// FuzzDecompressPayload feeds arbitrary payloads, compression IDs and
// limits to DecompressPayload, the one path by which client and server
// decompress. It must not panic; a refusal must carry InvalidArgument
// (unknown compressor) or ResourceExhausted (corrupt or over the limit);
// what it returns is never over the limit; an uncompressed payload comes
// back as is; and the data compressed by the frame's own compressor must
// come back intact when it fits. The seed corpus is in
// testdata/fuzz/FuzzDecompressPayload.
func FuzzDecompressPayload(f *testing.F) {
	f.Add(byte(protocol.FlagCompressed), byte(compress.Gzip), uint16(100), []byte("hello hello hello"))
	f.Add(byte(protocol.FlagCompressed), byte(compress.Zstd), uint16(4), []byte("hello hello hello"))
	f.Add(byte(protocol.FlagCompressed), byte(compress.Snappy), uint16(0), []byte{0xff, 0xff, 0xff, 0x0f})
	f.Add(byte(protocol.FlagCompressed), byte(9), uint16(10), []byte("x"))
	f.Add(byte(0), byte(compress.Gzip), uint16(1), []byte("not compressed"))
	f.Fuzz(func(t *testing.T, flags, id byte, limit uint16, data []byte) {
		max := int(limit)
		fr := protocol.Frame{Header: protocol.Header{Type: protocol.TypeRequest, Flags: protocol.Flags(flags), Compression: id}, Payload: data}
		out, bp, err := protocol.DecompressPayload(&fr, max)
		if fr.Flags&protocol.FlagCompressed == 0 {
			if err != nil || bp != nil || !bytes.Equal(out, data) {
				t.Fatalf("uncompressed payload changed: %q, %v", out, err)
			}
			return
		}
		comp := compress.Get(compress.ID(id))
		if err != nil {
			// Over the limit: ResourceExhausted; unknown compressor or
			// malformed input: InvalidArgument.
			want := fleet.InvalidArgument
			if errors.Is(err, compress.ErrTooLarge) {
				want = fleet.ResourceExhausted
			}
			if c := fleet.CodeOf(err); c != want {
				t.Fatalf("error code %v, want %v: %v", c, want, err)
			}
		} else {
			if comp == nil {
				t.Fatalf("unknown compressor %d accepted", id)
			}
			if max > 0 && len(out) > max {
				t.Fatalf("%d bytes out, limit %d", len(out), max)
			}
			if bp != nil {
				bufpool.Put(bp)
			}
		}
		if comp == nil {
			return
		}
		// The other way round: data compressed by this compressor.
		enc, err := comp.Compress(nil, data)
		if err != nil {
			t.Fatalf("%s: compress: %v", comp.Name(), err)
		}
		fr.Payload = enc
		out, bp, err = protocol.DecompressPayload(&fr, max)
		fits := max <= 0 && len(data) <= protocol.DefaultMaxDecompressedSize || len(data) <= max
		switch {
		case fits && err != nil:
			t.Fatalf("%s: %d bytes within limit %d refused: %v", comp.Name(), len(data), max, err)
		case fits && !bytes.Equal(out, data):
			t.Fatalf("%s: round trip changed the data", comp.Name())
		case !fits && fleet.CodeOf(err) != fleet.ResourceExhausted:
			t.Fatalf("%s: %d bytes over limit %d: got %v", comp.Name(), len(data), max, err)
		}
		if bp != nil {
			bufpool.Put(bp)
		}
	})
}
