package protocol_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/internal/bufpool"
	"github.com/fleetrpc/fleet/protocol"
)

var lim = protocol.Limits{}.WithDefaults()

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name    string
		h       protocol.Header
		svc, mt string
		md      fleet.Metadata
		payload []byte
	}{
		{"empty", protocol.Header{Type: protocol.TypePing, Seq: 1}, "", "", nil, nil},
		{"request", protocol.Header{Type: protocol.TypeRequest, Codec: 2, Seq: 1 << 40, Timeout: 1500}, "Arith", "Add", nil, []byte{1, 2, 3}},
		{"metadata", protocol.Header{Type: protocol.TypeRequest, Flags: protocol.FlagOneway | protocol.FlagCompressed, Compression: 3, Seq: 7},
			"S", "M", fleet.Metadata{"a": "1", "bb": "", "": "x"}, bytes.Repeat([]byte("p"), 300)},
		{"response", protocol.Header{Type: protocol.TypeResponse, Status: byte(fleet.NotFound), Seq: ^uint64(0)}, "", "", fleet.Metadata{"k": "v"}, []byte("unknown service")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			buf, err := protocol.AppendFrame([]byte("junk"), &tt.h, tt.svc, tt.mt, tt.md, tt.payload, 0)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(buf, []byte("junk")) {
				t.Fatal("AppendFrame overwrote dst")
			}
			r := protocol.NewReader(bytes.NewReader(buf[4:]), 0, protocol.Limits{})
			f, b, err := r.ReadFrame()
			if err != nil {
				t.Fatal(err)
			}
			defer bufpool.Put(b)
			if f.Header != tt.h {
				t.Errorf("header = %+v, want %+v", f.Header, tt.h)
			}
			if string(f.Service) != tt.svc || string(f.Method) != tt.mt {
				t.Errorf("names = %q %q", f.Service, f.Method)
			}
			if !bytes.Equal(f.Payload, tt.payload) {
				t.Errorf("payload = %q", f.Payload)
			}
			got := f.Metadata()
			if len(got) != len(tt.md) {
				t.Fatalf("metadata = %v, want %v", got, tt.md)
			}
			for k, v := range tt.md {
				if got[k] != v {
					t.Errorf("metadata[%q] = %q, want %q", k, got[k], v)
				}
			}
			if _, _, err := r.ReadFrame(); err != io.EOF {
				t.Errorf("after last frame: %v, want io.EOF", err)
			}
		})
	}
}

func TestManyFramesOneStream(t *testing.T) {
	var buf []byte
	for i := 0; i < 1000; i++ {
		var err error
		buf, err = protocol.AppendFrame(buf, &protocol.Header{Type: protocol.TypeRequest, Seq: uint64(i)}, "S", "M", nil, bytes.Repeat([]byte{byte(i)}, i), 0)
		if err != nil {
			t.Fatal(err)
		}
	}
	r := protocol.NewReader(bytes.NewReader(buf), 512, protocol.Limits{})
	for i := 0; i < 1000; i++ {
		f, b, err := r.ReadFrame()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if f.Seq != uint64(i) || len(f.Payload) != i {
			t.Fatalf("frame %d: seq %d, %d payload bytes", i, f.Seq, len(f.Payload))
		}
		bufpool.Put(b)
	}
}

// frame builds a valid frame body and lets a test corrupt it.
func frame(t *testing.T, mutate func([]byte) []byte) []byte {
	t.Helper()
	b, err := protocol.AppendFrame(nil, &protocol.Header{Type: protocol.TypeRequest, Seq: 1}, "Svc", "Method", fleet.Metadata{"k": "v"}, []byte("payload"), 0)
	if err != nil {
		t.Fatal(err)
	}
	b = mutate(b)
	return b
}

func setLen(b []byte) []byte {
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

func TestRejects(t *testing.T) {
	tests := []struct {
		name   string
		stream []byte
		code   fleet.Code
		sent   error
	}{
		{"huge length", append([]byte{0xFF, 0xFF, 0xFF, 0xFF}, make([]byte, 16)...), fleet.ResourceExhausted, protocol.ErrTooLarge},
		{"http request line", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), fleet.ResourceExhausted, protocol.ErrTooLarge},
		{"short length", []byte{0, 0, 0, 3, 1, 2, 3}, fleet.InvalidArgument, protocol.ErrMalformed},
		{"bad magic", frame(t, func(b []byte) []byte { b[4] = 0; return b }), fleet.InvalidArgument, protocol.ErrMalformed},
		{"bad version", frame(t, func(b []byte) []byte { b[6] = 9; return b }), fleet.InvalidArgument, protocol.ErrMalformed},
		{"bad type", frame(t, func(b []byte) []byte { b[7] = 0; return b }), fleet.InvalidArgument, protocol.ErrMalformed},
		{"name past end", frame(t, func(b []byte) []byte { b[24] = 100; return b }), fleet.InvalidArgument, protocol.ErrMalformed},
		{"name too long", frame(t, func(b []byte) []byte {
			b = b[:24]
			b = binary.AppendUvarint(b, 1000)
			b = append(b, strings.Repeat("x", 1000)...)
			b = append(b, 0, 0)
			return setLen(b)
		}), fleet.ResourceExhausted, protocol.ErrTooLarge},
		{"too many metadata pairs", frame(t, func(b []byte) []byte {
			b = append(b[:24], 0, 0)
			b = binary.AppendUvarint(b, 1_000_000)
			return setLen(b)
		}), fleet.ResourceExhausted, protocol.ErrTooLarge},
		{"metadata too big", frame(t, func(b []byte) []byte {
			b = append(b[:24], 0, 0, 4)
			for i := 0; i < 4; i++ {
				b = append(b, 1, 'k')
				b = binary.AppendUvarint(b, 5000)
				b = append(b, strings.Repeat("v", 5000)...)
			}
			return setLen(b)
		}), fleet.ResourceExhausted, protocol.ErrTooLarge},
		{"metadata count past end", frame(t, func(b []byte) []byte {
			b = append(b[:24], 0, 0, 3, 1, 'k')
			return setLen(b)
		}), fleet.InvalidArgument, protocol.ErrMalformed},
		{"truncated frame", frame(t, func(b []byte) []byte { return b[:len(b)-2] }), fleet.InvalidArgument, protocol.ErrMalformed},
		{"truncated prefix", []byte{0, 0}, fleet.InvalidArgument, protocol.ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := protocol.NewReader(bytes.NewReader(tt.stream), 0, protocol.Limits{})
			_, _, err := r.ReadFrame()
			if err == nil {
				t.Fatal("accepted")
			}
			if c := fleet.CodeOf(err); c != tt.code {
				t.Errorf("code = %v, want %v (%v)", c, tt.code, err)
			}
			if !errors.Is(err, tt.sent) {
				t.Errorf("error %v does not wrap %v", err, tt.sent)
			}
		})
	}
}

// TestHugePrefixAllocatesLittle: a length prefix of 0xFFFFFFFF followed by
// 16 bytes is rejected before anything of that size is allocated.
func TestHugePrefixAllocatesLittle(t *testing.T) {
	stream := append([]byte{0xFF, 0xFF, 0xFF, 0xFF}, make([]byte, 16)...)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r := protocol.NewReader(bytes.NewReader(stream), 4096, protocol.Limits{})
	_, _, err := r.ReadFrame()
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Fatal("accepted")
	}
	if d := after.TotalAlloc - before.TotalAlloc; d >= 64<<10 {
		t.Fatalf("allocated %d bytes, want < 64 KiB", d)
	}
}

// TestLargeAnnouncedFrameAllocatesWhatArrives: a frame that announces the
// maximum size but sends only a little makes the reader allocate about
// what arrived, not what was announced.
func TestLargeAnnouncedFrameAllocatesWhatArrives(t *testing.T) {
	stream := append([]byte{0, 0x40, 0, 0}, make([]byte, 1000)...) // 4 MiB announced
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r := protocol.NewReader(bytes.NewReader(stream), 4096, protocol.Limits{})
	_, _, err := r.ReadFrame()
	runtime.ReadMemStats(&after)
	if fleet.CodeOf(err) != fleet.InvalidArgument {
		t.Fatalf("err = %v, want a truncated-frame error", err)
	}
	if d := after.TotalAlloc - before.TotalAlloc; d >= 256<<10 {
		t.Fatalf("allocated %d bytes for 1000 received", d)
	}
}

func TestEndFrameLimit(t *testing.T) {
	_, err := protocol.AppendFrame(nil, &protocol.Header{Type: protocol.TypeRequest}, "S", "M", nil, make([]byte, 2000), 1000)
	if fleet.CodeOf(err) != fleet.ResourceExhausted {
		t.Fatalf("err = %v, want ResourceExhausted", err)
	}
}

func TestParseAllocatesNothing(t *testing.T) {
	b, _ := protocol.AppendFrame(nil, &protocol.Header{Type: protocol.TypeRequest, Seq: 1}, "Svc", "Method", fleet.Metadata{"k": "v"}, make([]byte, 581), 0)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := protocol.Parse(b[4:], &lim); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Parse allocates %v times", allocs)
	}
}

func BenchmarkAppendFrame(b *testing.B) {
	payload := make([]byte, 581)
	h := protocol.Header{Type: protocol.TypeRequest, Seq: 1}
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		buf, _ = protocol.AppendFrame(buf[:0], &h, "Hello", "Say", nil, payload, 0)
	}
}

func BenchmarkParse(b *testing.B) {
	buf, _ := protocol.AppendFrame(nil, &protocol.Header{Type: protocol.TypeRequest, Seq: 1}, "Hello", "Say", fleet.Metadata{"k": "v"}, make([]byte, 581), 0)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := protocol.Parse(buf[4:], &lim); err != nil {
			b.Fatal(err)
		}
	}
}

// TestMetadataOutlivesBuffer: the map Metadata returns shares no memory
// with the frame's buffer, which goes back to the pool after the request
// is decoded.
func TestMetadataOutlivesBuffer(t *testing.T) {
	md := fleet.Metadata{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "k": "v"}
	buf, err := protocol.AppendFrame(nil, &protocol.Header{Type: protocol.TypeRequest, Seq: 1}, "S", "M", md, []byte("x"), 0)
	if err != nil {
		t.Fatal(err)
	}
	f, b, err := protocol.NewReader(bytes.NewReader(buf), 0, protocol.Limits{}).ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	got := f.Metadata()
	for i := range *b {
		(*b)[i] = 'X'
	}
	bufpool.Put(b)
	for k, v := range md {
		if got[k] != v {
			t.Errorf("metadata[%q] = %q after the buffer was overwritten, want %q", k, got[k], v)
		}
	}
}
