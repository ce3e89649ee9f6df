package codec_test

import (
	"bytes"
	"testing"

	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/internal/gencodemsg"
)

// gencodeWithSlice is the benchmark message with Field5, its one slice,
// filled.
func gencodeWithSlice() *gencodemsg.BenchmarkMessage {
	m := gencodemsg.New()
	m.Field5 = []uint64{1, 1 << 40, 7}
	return m
}

// TestGencodeFormat checks the codec writes what gencode's generated
// Marshal writes, of the length Size announces, and that MarshalAppend
// encodes in place into spare capacity.
func TestGencodeFormat(t *testing.T) {
	m := gencodeWithSlice()
	want, err := m.Marshal(nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := codec.GencodeCodec{}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) || uint64(len(got)) != m.Size() {
		t.Fatalf("Marshal = %d bytes %x, want gencode's %d bytes %x", len(got), got, len(want), want)
	}
	buf := make([]byte, 3, 1024)
	out, err := codec.GencodeCodec{}.MarshalAppend(buf, m)
	if err != nil {
		t.Fatal(err)
	}
	if &out[0] != &buf[0] || !bytes.Equal(out[3:], want) {
		t.Fatalf("MarshalAppend did not encode in place after the prefix")
	}
}

// TestGencodeDecodeReusesTarget checks a target decoded twice holds the
// second value only (gencode writes every field).
func TestGencodeDecodeReusesTarget(t *testing.T) {
	c := codec.GencodeCodec{}
	long, _ := c.Marshal(gencodeWithSlice())
	short := gencodemsg.New()
	short.Field1 = "x"
	b, _ := c.Marshal(short)
	var got gencodemsg.BenchmarkMessage
	if err := c.Unmarshal(long, &got); err != nil {
		t.Fatal(err)
	}
	if err := c.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Field1 != "x" || len(got.Field5) != 0 || got.Field129 != short.Field129 {
		t.Fatalf("second decode left %q, Field5 %v", got.Field1, got.Field5)
	}
}

// FuzzGencode feeds arbitrary payloads to the gencode codec decoding the
// benchmark message: it must return an error or a value, never panic;
// whatever decodes must encode, and that encoding must decode to a value
// that encodes to the same bytes. The seed corpus (valid messages,
// truncations, lying lengths, overlong varints) is in
// testdata/fuzz/FuzzGencode.
//
// gencode's generated decoder allocates slices of the length a payload
// announces (see GencodeCodec); a fuzzing run (-fuzz) may therefore hit
// large allocations, which is the documented limitation, not a failure of
// the codec.
func FuzzGencode(f *testing.F) {
	c := codec.GencodeCodec{}
	for _, m := range []*gencodemsg.BenchmarkMessage{gencodemsg.New(), gencodeWithSlice(), {}} {
		b, err := c.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v1 gencodemsg.BenchmarkMessage
		if err := c.Unmarshal(data, &v1); err != nil {
			return
		}
		enc1, err := c.Marshal(&v1)
		if err != nil {
			t.Fatalf("decoded %x but cannot encode it: %v", data, err)
		}
		var v2 gencodemsg.BenchmarkMessage
		if err := c.Unmarshal(enc1, &v2); err != nil {
			t.Fatalf("own encoding %x does not decode: %v", enc1, err)
		}
		enc2, err := c.Marshal(&v2)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(enc1, enc2) {
			t.Fatalf("round trip not stable: %x then %x", enc1, enc2)
		}
	})
}
