package protocol_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/compress"
	"github.com/fleetrpc/fleet/protocol"
)

// FuzzDecodeMessage feeds arbitrary payloads, flags, codec and compression
// IDs and limits to DecompressRoom and DecodeMessage, the path by which
// client and server read every request, response and stream message. It
// checks that they never panic, that every error is InvalidArgument or
// ResourceExhausted (the latter exactly when the payload is over the
// limit), that a decoded payload is within the limit, and that a payload
// framed by AppendMessage decodes back to itself. The seed corpus is in
// testdata/fuzz/FuzzDecodeMessage.
func FuzzDecodeMessage(f *testing.F) {
	f.Add(byte(0), byte(codec.Raw), byte(0), uint16(100), []byte("plain"))
	f.Add(byte(protocol.FlagCompressed), byte(codec.JSON), byte(compress.Gzip), uint16(100), []byte("\x1f\x8b\b\x00garbage"))
	f.Add(byte(protocol.FlagCompressed), byte(codec.Raw), byte(compress.Zstd), uint16(10), []byte("(\xb5/\xfd\x00P\x03\x00\x10x"))
	f.Add(byte(0), byte(codec.Protobuf), byte(0), uint16(0), []byte("\n\x03abc"))
	f.Add(byte(0), byte(codec.MsgPack), byte(0), uint16(0), []byte("\xdf\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, flags, cd, comp byte, limit uint16, data []byte) {
		h := protocol.Header{Type: protocol.TypeRequest, Flags: protocol.Flags(flags), Codec: cd, Compression: comp}
		b, err := protocol.AppendFrame(nil, &h, "", "", nil, data, 0)
		if err != nil {
			return
		}
		fr, err := protocol.Parse(b[protocol.PrefixSize:], &lim)
		if err != nil {
			t.Fatalf("Parse of a built frame: %v", err)
		}
		var v any = new(map[string]any)
		switch codec.ID(cd) {
		case codec.Raw:
			v = new([]byte)
		case codec.Protobuf:
			v = new(struct{}) // not a proto.Message: refused, never a panic
		}
		room, err := protocol.DecompressRoom(&fr, int(limit))
		if err == nil {
			effective := int(limit)
			if effective == 0 {
				effective = protocol.DefaultMaxDecompressedSize
			}
			if room < 0 || room > effective {
				t.Fatalf("room %d outside the limit %d", room, limit)
			}
			err = protocol.DecodeMessage(&fr, v, room, nil)
		}
		if err != nil {
			want := fleet.InvalidArgument
			if errors.Is(err, compress.ErrTooLarge) {
				want = fleet.ResourceExhausted
			}
			if c := fleet.CodeOf(err); c != want {
				t.Fatalf("code %v, want %v: %v", c, want, err)
			}
		}

		// The other way round: data framed by AppendMessage with the
		// raw codec and this compressor comes back as it was.
		if comp != 0 && compress.Get(compress.ID(comp)) == nil {
			return
		}
		m := protocol.Message{Header: protocol.Header{Type: protocol.TypeResponse}, Codec: codec.Get(codec.Raw), Compression: compress.ID(comp)}
		b, span, err := protocol.AppendMessage(nil, &m, data)
		if err != nil {
			t.Fatalf("AppendMessage: %v", err)
		}
		if fr, err = protocol.Parse(b[span.Start+protocol.PrefixSize:], &lim); err != nil {
			t.Fatalf("Parse of AppendMessage's frame: %v", err)
		}
		var out []byte
		room, err = protocol.DecompressRoom(&fr, int(limit))
		if err == nil {
			err = protocol.DecodeMessage(&fr, &out, room, nil)
		}
		fits := fr.Flags&protocol.FlagCompressed == 0 || len(data) <= int(limit) || limit == 0 && len(data) <= protocol.DefaultMaxDecompressedSize
		switch {
		case fits && err != nil:
			t.Fatalf("%d bytes (limit %d) refused: %v", len(data), limit, err)
		case fits && !bytes.Equal(out, data) && len(data) > 0:
			t.Fatalf("round trip changed the data")
		case !fits && fleet.CodeOf(err) != fleet.ResourceExhausted:
			t.Fatalf("%d bytes over the limit %d: %v", len(data), limit, err)
		}
	})
}
