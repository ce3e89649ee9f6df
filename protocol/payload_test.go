package protocol_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/compress"
	"github.com/fleetrpc/fleet/protocol"
)

func parse(t *testing.T, b []byte) protocol.Frame {
	t.Helper()
	f, err := protocol.Parse(b[protocol.PrefixSize:], &lim)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return f
}

func TestAppendControl(t *testing.T) {
	tests := []struct {
		typ protocol.Type
		seq uint64
	}{
		{protocol.TypePing, 1},
		{protocol.TypePong, 1<<64 - 1},
		{protocol.TypeGoAway, 0},
	}
	for _, tt := range tests {
		var b [protocol.ControlFrameSize]byte
		out := protocol.AppendControl(b[:0], tt.typ, tt.seq)
		if len(out) != protocol.ControlFrameSize {
			t.Fatalf("len = %d, want %d", len(out), protocol.ControlFrameSize)
		}
		want, _ := protocol.AppendFrame(nil, &protocol.Header{Type: tt.typ, Seq: tt.seq}, "", "", nil, nil, 0)
		if !bytes.Equal(out, want) {
			t.Fatalf("AppendControl(%d, %d) = %x, want %x", tt.typ, tt.seq, out, want)
		}
		f := parse(t, out)
		if f.Type != tt.typ || f.Seq != tt.seq || len(f.Payload) != 0 {
			t.Fatalf("parsed %+v", f.Header)
		}
	}
	if n := testing.AllocsPerRun(100, func() {
		var b [protocol.ControlFrameSize]byte
		_ = protocol.AppendControl(b[:0], protocol.TypePing, 9)
	}); n != 0 {
		t.Fatalf("AppendControl allocates %v times, want 0", n)
	}
}

func TestSetCompressed(t *testing.T) {
	h := protocol.Header{Type: protocol.TypeRequest, Flags: protocol.FlagOneway, Codec: 2, Seq: 5}
	buf, start := protocol.BeginFrame([]byte("junk before"), &h, "S", "M", nil)
	buf = append(buf, "payload"...)
	if err := protocol.EndFrame(buf, start, 0); err != nil {
		t.Fatal(err)
	}
	protocol.SetCompressed(buf, start, compress.Zstd)
	f := parse(t, buf[start:])
	if f.Flags != protocol.FlagOneway|protocol.FlagCompressed || f.Compression != byte(compress.Zstd) || f.Codec != 2 || f.Seq != 5 {
		t.Fatalf("header after SetCompressed: %+v", f.Header)
	}
}

// build makes a request frame with payload, compressed with id when id is
// not None, and parses it back.
func build(t *testing.T, payload []byte, id compress.ID) (protocol.Frame, error) {
	t.Helper()
	h := protocol.Header{Type: protocol.TypeRequest, Seq: 1}
	buf, start := protocol.BeginFrame(nil, &h, "S", "M", fleet.Metadata{"k": "v"})
	p0 := len(buf)
	buf = append(buf, payload...)
	var err error
	if id != compress.None {
		if buf, err = protocol.CompressPayload(buf, start, p0, id); err != nil {
			return protocol.Frame{}, err
		}
	}
	if err := protocol.EndFrame(buf, start, 0); err != nil {
		t.Fatal(err)
	}
	return parse(t, buf), nil
}

func TestCompressDecompressPayload(t *testing.T) {
	big := bytes.Repeat([]byte("fleet "), 2000)
	tests := []struct {
		name           string
		payload        []byte
		id             compress.ID
		wantCompressed bool
	}{
		{"none", big, compress.None, false},
		{"gzip", big, compress.Gzip, true},
		{"zstd", big, compress.Zstd, true},
		{"snappy", big, compress.Snappy, true},
		{"incompressible stays raw", []byte{0x01}, compress.Zstd, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := build(t, tt.payload, tt.id)
			if err != nil {
				t.Fatal(err)
			}
			if got := f.Flags&protocol.FlagCompressed != 0; got != tt.wantCompressed {
				t.Fatalf("compressed = %v, want %v", got, tt.wantCompressed)
			}
			if tt.wantCompressed && len(f.Payload) >= len(tt.payload) {
				t.Fatalf("compressed payload %d bytes, not smaller than %d", len(f.Payload), len(tt.payload))
			}
			if md := f.Metadata(); md["k"] != "v" {
				t.Fatalf("metadata lost: %v", md)
			}
			out, _, err := protocol.DecompressPayload(&f, 0)
			if err != nil || !bytes.Equal(out, tt.payload) {
				t.Fatalf("DecompressPayload = %d bytes, %v", len(out), err)
			}
		})
	}
}

func TestPayloadCompressionErrors(t *testing.T) {
	big := bytes.Repeat([]byte("fleet "), 2000)
	if _, err := build(t, big, compress.ID(200)); fleet.CodeOf(err) != fleet.InvalidArgument {
		t.Fatalf("CompressPayload with an unregistered id: %v, want invalid_argument", err)
	}

	f, err := build(t, big, compress.Zstd)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := protocol.DecompressPayload(&f, 1000); fleet.CodeOf(err) != fleet.ResourceExhausted || !errors.Is(err, compress.ErrTooLarge) {
		t.Fatalf("DecompressPayload over the limit: %v, want resource_exhausted wrapping compress.ErrTooLarge", err)
	}
	f.Compression = 200
	if _, _, err := protocol.DecompressPayload(&f, 0); fleet.CodeOf(err) != fleet.InvalidArgument {
		t.Fatalf("DecompressPayload with an unknown compressor: %v, want invalid_argument", err)
	}
}
