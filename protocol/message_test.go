package protocol_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/compress"
	"github.com/fleetrpc/fleet/protocol"
)

// failCodec fails to encode and decode everything.
type failCodec struct{}

var errFail = errors.New("fail codec")

func (failCodec) Name() string                { return "fail" }
func (failCodec) Marshal(any) ([]byte, error) { return nil, errFail }
func (failCodec) Unmarshal([]byte, any) error { return errFail }

// TestMessageRoundTrip: a value framed by AppendMessage, parsed, bounded
// by DecompressRoom and decoded by DecodeMessage comes back equal, for
// every compressor, compressed only from CompressMin on.
func TestMessageRoundTrip(t *testing.T) {
	payload := bytes.Repeat([]byte("fleet message "), 1000)
	for _, comp := range []compress.ID{compress.None, compress.Gzip, compress.Snappy, compress.Zstd} {
		for _, min := range []int{0, len(payload) + 1} {
			m := protocol.Message{
				Header:  protocol.Header{Type: protocol.TypeRequest, Codec: byte(codec.Raw), Seq: 7},
				Service: "S", Method: "M", Metadata: fleet.Metadata{"k": "v"}, Pairs: []string{"a", "b"},
				Codec: codec.Get(codec.Raw), Compression: comp, CompressMin: min,
			}
			buf, span, err := protocol.AppendMessage([]byte("before"), &m, payload)
			if err != nil {
				t.Fatalf("%d/%d: AppendMessage: %v", comp, min, err)
			}
			if span.Start != len("before") || string(buf[:span.Start]) != "before" {
				t.Fatalf("%d/%d: span %+v", comp, min, span)
			}
			f := parse(t, buf[span.Start:])
			compressed := f.Flags&protocol.FlagCompressed != 0
			if compressed != (comp != compress.None && min == 0) || len(f.Payload) != len(buf)-span.Payload {
				t.Fatalf("%d/%d: compressed %v, payload %d bytes, span %+v", comp, min, compressed, len(f.Payload), span)
			}
			if string(f.Service) != "S" || f.Metadata()["a"] != "b" || f.Metadata()["k"] != "v" {
				t.Fatalf("%d/%d: names or metadata lost", comp, min)
			}
			room, err := protocol.DecompressRoom(&f, 0)
			if err != nil {
				t.Fatalf("%d/%d: DecompressRoom: %v", comp, min, err)
			}
			var out []byte
			if err := protocol.DecodeMessage(&f, &out, room, nil); err != nil || !bytes.Equal(out, payload) {
				t.Fatalf("%d/%d: DecodeMessage: %v", comp, min, err)
			}
		}
	}
}

// TestMessageErrors: the error mapping of message.go, one row each.
func TestMessageErrors(t *testing.T) {
	raw := codec.Get(codec.Raw)
	big := make([]byte, 2000)
	tests := []struct {
		name  string
		m     protocol.Message
		v     any
		code  fleet.Code
		cause error
	}{
		{"no codec", protocol.Message{}, []byte("x"), fleet.InvalidArgument, nil},
		{"encode fails", protocol.Message{Codec: failCodec{}}, 1, fleet.Internal, errFail},
		{"compressor not registered", protocol.Message{Codec: raw, Compression: 200}, []byte("x"), fleet.InvalidArgument, nil},
		{"frame over MaxFrame", protocol.Message{Codec: raw, MaxFrame: 1000}, big, fleet.ResourceExhausted, protocol.ErrTooLarge},
	}
	for _, tt := range tests {
		tt.m.Type = protocol.TypeRequest
		dst := make([]byte, 3, 8)
		buf, _, err := protocol.AppendMessage(dst, &tt.m, tt.v)
		if fleet.CodeOf(err) != tt.code || (tt.cause != nil && !errors.Is(err, tt.cause)) {
			t.Errorf("%s: %v, want %v wrapping %v", tt.name, err, tt.code, tt.cause)
		}
		if len(buf) != 3 {
			t.Errorf("%s: %d bytes left in dst, want the 3 it had", tt.name, len(buf))
		}
	}

	frame := func(h protocol.Header, payload []byte) protocol.Frame {
		h.Type = protocol.TypeResponse
		b, err := protocol.AppendFrame(nil, &h, "", "", nil, payload, 0)
		if err != nil {
			t.Fatal(err)
		}
		return parse(t, b)
	}
	zipped, _ := compress.GzipCompressor{}.Compress(nil, big)
	decodes := []struct {
		name string
		f    protocol.Frame
		room int
		code fleet.Code
	}{
		{"unknown codec", frame(protocol.Header{Codec: 200}, nil), 0, fleet.InvalidArgument},
		{"unknown compression", frame(protocol.Header{Flags: protocol.FlagCompressed, Compression: 200}, []byte("x")), 10, fleet.InvalidArgument},
		{"corrupt", frame(protocol.Header{Flags: protocol.FlagCompressed, Compression: byte(compress.Gzip)}, []byte("not gzip at all, no")), 100, fleet.InvalidArgument},
		{"over room", frame(protocol.Header{Flags: protocol.FlagCompressed, Compression: byte(compress.Gzip)}, zipped), 1000, fleet.ResourceExhausted},
		{"undecodable", frame(protocol.Header{Codec: byte(codec.JSON)}, []byte("{")), 0, fleet.InvalidArgument},
	}
	for _, tt := range decodes {
		var v map[string]any
		var rv []byte
		target := any(&v)
		if tt.f.Codec == byte(codec.Raw) {
			target = &rv
		}
		if err := protocol.DecodeMessage(&tt.f, target, tt.room, nil); fleet.CodeOf(err) != tt.code {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.code)
		}
	}
	f := frame(protocol.Header{Flags: protocol.FlagCompressed, Compression: byte(compress.Gzip)}, zipped)
	if _, err := protocol.DecompressRoom(&f, 1000); fleet.CodeOf(err) != fleet.ResourceExhausted || !errors.Is(err, compress.ErrTooLarge) {
		t.Errorf("DecompressRoom over the limit: %v", err)
	}
}

// TestAppendStatus: the code and message of an error, OK for nil,
// Unknown for an error without a code, and a short stand-in when the
// metadata makes the frame too large.
func TestAppendStatus(t *testing.T) {
	tests := []struct {
		err  error
		md   fleet.Metadata
		code fleet.Code
		msg  string
	}{
		{nil, nil, fleet.OK, ""},
		{fleet.NewError(fleet.NotFound, "no such thing"), fleet.Metadata{"k": "v"}, fleet.NotFound, "no such thing"},
		{errors.New("plain"), nil, fleet.Unknown, "plain"},
		{fleet.NewError(fleet.Aborted, "x"), fleet.Metadata{"k": strings.Repeat("v", 2000)}, fleet.Aborted, "status too large"},
	}
	for _, tt := range tests {
		h := protocol.Header{Type: protocol.TypeStreamEnd, Seq: 3}
		f := parse(t, protocol.AppendStatus(nil, &h, tt.md, tt.err, 1000))
		if fleet.Code(f.Status) != tt.code || string(f.Payload) != tt.msg || f.Seq != 3 {
			t.Errorf("%v: status %d %q", tt.err, f.Status, f.Payload)
		}
	}
}

// TestAppendMessageAllocs: framing a raw value into a buffer with room
// allocates nothing.
func TestAppendMessageAllocs(t *testing.T) {
	buf := make([]byte, 0, 4096)
	v := []byte("payload")
	m := protocol.Message{Header: protocol.Header{Type: protocol.TypeRequest}, Codec: codec.Get(codec.Raw), Service: "S", Method: "M"}
	if n := testing.AllocsPerRun(100, func() {
		_, _, _ = protocol.AppendMessage(buf[:0], &m, &v)
	}); n != 0 {
		t.Fatalf("AppendMessage allocates %v times, want 0", n)
	}
}
