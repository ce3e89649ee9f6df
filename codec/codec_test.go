package codec_test

import (
	"bytes"
	"errors"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/internal/benchpb"
	"github.com/fleetrpc/fleet/internal/gencodemsg"
)

func TestRegistered(t *testing.T) {
	tests := []struct {
		id   codec.ID
		name string
	}{
		{codec.Raw, "raw"},
		{codec.JSON, "json"},
		{codec.Protobuf, "protobuf"},
		{codec.MsgPack, "msgpack"},
		{codec.Gob, "gob"},
		{codec.Gencode, "gencode"},
	}
	for _, tt := range tests {
		c := codec.Get(tt.id)
		if c == nil {
			t.Fatalf("Get(%d) = nil, want %s", tt.id, tt.name)
		}
		if c.Name() != tt.name {
			t.Errorf("Get(%d).Name() = %q, want %q", tt.id, c.Name(), tt.name)
		}
		if _, ok := c.(codec.Appender); !ok {
			t.Errorf("%s does not implement Appender", tt.name)
		}
	}
	if c := codec.Get(200); c != nil {
		t.Errorf("Get(200) = %v, want nil", c)
	}
}

type inner struct {
	B []byte            `json:"b" msgpack:"b"`
	M map[string]string `json:"m" msgpack:"m"`
}

type nested struct {
	Name  string   `json:"name" msgpack:"name"`
	N     int64    `json:"n" msgpack:"n"`
	F     float64  `json:"f" msgpack:"f"`
	List  []uint32 `json:"list" msgpack:"list"`
	Inner *inner   `json:"inner" msgpack:"inner"`
}

func newNested() *nested {
	return &nested{
		Name: "héllo <fleet>", N: -1 << 40, F: 3.25, List: []uint32{1, 2, 1 << 31},
		Inner: &inner{B: []byte{0, 1, 2, 255}, M: map[string]string{"k": "v"}},
	}
}

// equal compares decoded values: proto messages with proto.Equal, the rest
// with reflect.DeepEqual.
func equal(a, b any) bool {
	if ma, ok := a.(proto.Message); ok {
		mb, ok := b.(proto.Message)
		return ok && proto.Equal(ma, mb)
	}
	return reflect.DeepEqual(a, b)
}

func TestRoundTrip(t *testing.T) {
	raw := []byte("raw payload \x00\xff")
	tests := []struct {
		name  string
		codec codec.Codec
		in    any        // value to encode
		out   func() any // new pointer to decode into
		want  any        // expected *out after decoding; in when nil
	}{
		{"raw/slice", codec.RawCodec{}, raw, func() any { return new([]byte) }, &raw},
		{"raw/pointer", codec.RawCodec{}, &raw, func() any { return new([]byte) }, nil},
		{"raw/empty", codec.RawCodec{}, []byte{}, func() any { return new([]byte) }, &[]byte{}},
		{"protobuf/benchmark", codec.ProtobufCodec{}, benchpb.New(), func() any { return new(benchpb.BenchmarkMessage) }, nil},
		{"json/plain", codec.JSONCodec{}, benchpb.NewPlain(), func() any { return new(benchpb.Plain) }, nil},
		{"json/proto", codec.JSONCodec{}, benchpb.New(), func() any { return new(benchpb.BenchmarkMessage) }, nil},
		{"json/nested", codec.JSONCodec{}, newNested(), func() any { return new(nested) }, nil},
		{"msgpack/plain", codec.MsgPackCodec{}, benchpb.NewPlain(), func() any { return new(benchpb.Plain) }, nil},
		{"msgpack/proto", codec.MsgPackCodec{}, benchpb.New(), func() any { return new(benchpb.BenchmarkMessage) }, nil},
		{"msgpack/nested", codec.MsgPackCodec{}, newNested(), func() any { return new(nested) }, nil},
		{"gob/plain", codec.GobCodec{}, benchpb.NewPlain(), func() any { return new(benchpb.Plain) }, nil},
		{"gob/proto", codec.GobCodec{}, benchpb.New(), func() any { return new(benchpb.BenchmarkMessage) }, nil},
		{"gob/nested", codec.GobCodec{}, newNested(), func() any { return new(nested) }, nil},
		{"gencode/benchmark", codec.GencodeCodec{}, gencodemsg.New(), func() any { return new(gencodemsg.BenchmarkMessage) }, nil},
		{"gencode/slice", codec.GencodeCodec{}, gencodeWithSlice(), func() any { return new(gencodemsg.BenchmarkMessage) }, nil},
		{"gencode/empty", codec.GencodeCodec{}, new(gencodemsg.BenchmarkMessage), func() any { return new(gencodemsg.BenchmarkMessage) }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := tt.want
			if want == nil {
				want = tt.in
			}
			data, err := tt.codec.Marshal(tt.in)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}

			// MarshalAppend gives the same bytes after the prefix.
			prefix := []byte("prefix")
			app, err := codec.MarshalAppend(tt.codec, bytes.Clone(prefix), tt.in)
			if err != nil {
				t.Fatalf("MarshalAppend: %v", err)
			}
			if !bytes.HasPrefix(app, prefix) {
				t.Fatalf("MarshalAppend lost the prefix: %q", app)
			}
			if tt.codec.Name() != "protobuf" && !bytes.Equal(app[len(prefix):], data) {
				t.Fatalf("MarshalAppend = %x, Marshal = %x", app[len(prefix):], data)
			}

			// Decode from a buffer the caller then reuses: the value must
			// not change.
			buf := bytes.Clone(data)
			got := tt.out()
			if err := tt.codec.Unmarshal(buf, got); err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			for i := range buf {
				buf[i] = 0xa5
			}
			if !equal(got, want) {
				t.Fatalf("round trip:\n got %#v\nwant %#v", got, want)
			}

			got2 := tt.out()
			if err := tt.codec.Unmarshal(app[len(prefix):], got2); err != nil {
				t.Fatalf("Unmarshal of MarshalAppend output: %v", err)
			}
			if !equal(got2, want) {
				t.Fatalf("round trip via MarshalAppend:\n got %#v\nwant %#v", got2, want)
			}
		})
	}
}

func TestProtobufSize(t *testing.T) {
	b, err := codec.ProtobufCodec{}.Marshal(benchpb.New())
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 581 {
		t.Fatalf("len = %d, want 581", len(b))
	}
}

func TestRawDoesNotAlias(t *testing.T) {
	data := []byte("abc")
	var got []byte
	if err := (codec.RawCodec{}).Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if &got[0] == &data[0] {
		t.Fatal("Unmarshal aliases its input")
	}
	var nilOut []byte
	if err := (codec.RawCodec{}).Unmarshal(nil, &nilOut); err != nil || nilOut != nil {
		t.Fatalf("Unmarshal(nil) = %v, %v", nilOut, err)
	}
}

func TestErrors(t *testing.T) {
	var (
		nilMsg   *benchpb.BenchmarkMessage
		nilPlain *benchpb.Plain
		nilBytes *[]byte
	)
	gobPlain, _ := codec.GobCodec{}.Marshal(benchpb.NewPlain())
	gen, _ := codec.GencodeCodec{}.Marshal(gencodeWithSlice())
	var nilGen *gencodemsg.BenchmarkMessage
	msgpPlain, _ := codec.MsgPackCodec{}.Marshal(benchpb.NewPlain())
	deep := append(bytes.Repeat([]byte{0x91}, 20000), 0xc0) // [[[...nil...]]]
	tests := []struct {
		name    string
		codec   codec.Codec
		marshal bool // Marshal(v) when true, else Unmarshal(data, v)
		v       any
		data    []byte
		errHas  string // substring of the error
	}{
		{"raw/marshal string", codec.RawCodec{}, true, "s", nil, "unsupported type string"},
		{"raw/marshal nil pointer", codec.RawCodec{}, true, nilBytes, nil, "nil *[]uint8"},
		{"raw/unmarshal string", codec.RawCodec{}, false, new(string), []byte("x"), "unsupported type *string"},
		{"raw/unmarshal non-pointer", codec.RawCodec{}, false, []byte{}, []byte("x"), "unsupported type []uint8"},
		{"raw/unmarshal nil pointer", codec.RawCodec{}, false, nilBytes, []byte("x"), "nil *[]uint8"},

		{"protobuf/marshal wrong type", codec.ProtobufCodec{}, true, benchpb.NewPlain(), nil, "unsupported type *benchpb.Plain (want a proto.Message)"},
		{"protobuf/marshal int", codec.ProtobufCodec{}, true, 1, nil, "want a proto.Message"},
		{"protobuf/marshal nil", codec.ProtobufCodec{}, true, nil, nil, "unsupported type <nil>"},
		{"protobuf/marshal missing required", codec.ProtobufCodec{}, true, &benchpb.BenchmarkMessage{}, nil, "required field"},
		{"protobuf/unmarshal wrong type", codec.ProtobufCodec{}, false, new(benchpb.Plain), []byte{}, "want a proto.Message"},
		{"protobuf/unmarshal nil pointer", codec.ProtobufCodec{}, false, nilMsg, []byte{}, "nil *benchpb.BenchmarkMessage"},
		{"protobuf/unmarshal garbage", codec.ProtobufCodec{}, false, new(benchpb.BenchmarkMessage), []byte{0xff, 0xff, 0xff}, "proto"},
		{"protobuf/unmarshal missing required", codec.ProtobufCodec{}, false, new(benchpb.BenchmarkMessage), []byte{}, "required field"},

		{"json/marshal chan", codec.JSONCodec{}, true, make(chan int), nil, "unsupported type"},
		{"json/unmarshal nil pointer", codec.JSONCodec{}, false, nilPlain, []byte("{}"), "nil"},
		{"json/unmarshal non-pointer", codec.JSONCodec{}, false, benchpb.Plain{}, []byte("{}"), "non-pointer"},
		{"json/unmarshal garbage", codec.JSONCodec{}, false, new(benchpb.Plain), []byte("{"), "unexpected end"},
		{"json/unmarshal trailing", codec.JSONCodec{}, false, new(benchpb.Plain), []byte("{} {}"), "after top-level value"},

		{"msgpack/marshal chan", codec.MsgPackCodec{}, true, make(chan int), nil, "codec msgpack"},
		{"msgpack/unmarshal nil", codec.MsgPackCodec{}, false, nil, msgpPlain, "Unmarshal into nil"},
		{"msgpack/unmarshal nil pointer", codec.MsgPackCodec{}, false, nilPlain, msgpPlain, "nil *benchpb.Plain"},
		{"msgpack/unmarshal non-pointer", codec.MsgPackCodec{}, false, benchpb.Plain{}, msgpPlain, "non-pointer"},
		{"msgpack/unmarshal empty", codec.MsgPackCodec{}, false, new(benchpb.Plain), nil, "truncated"},
		{"msgpack/unmarshal truncated", codec.MsgPackCodec{}, false, new(benchpb.Plain), msgpPlain[:len(msgpPlain)-1], "truncated"},
		{"msgpack/unmarshal trailing", codec.MsgPackCodec{}, false, new(benchpb.Plain), append(bytes.Clone(msgpPlain), 0xc0), "trailing data"},
		{"msgpack/unmarshal lying array", codec.MsgPackCodec{}, false, new([]uint64), []byte{0xdd, 0x7f, 0xff, 0xff, 0xff, 0x01}, "oversized length"},
		{"msgpack/unmarshal lying map", codec.MsgPackCodec{}, false, new(map[string]any), []byte{0xdf, 0x7f, 0xff, 0xff, 0xff, 0xa0, 0xc0}, "oversized length"},
		{"msgpack/unmarshal lying string", codec.MsgPackCodec{}, false, new(string), []byte{0xdb, 0x7f, 0xff, 0xff, 0xff, 'a'}, "oversized length"},
		{"msgpack/unmarshal 0xc1", codec.MsgPackCodec{}, false, new(any), []byte{0xc1}, "0xc1"},
		{"msgpack/unmarshal deep", codec.MsgPackCodec{}, false, new(any), deep, "nesting too deep"},
		{"msgpack/unmarshal wrong type", codec.MsgPackCodec{}, false, new(int), msgpPlain, "codec msgpack"},

		{"gob/marshal nil pointer", codec.GobCodec{}, true, nilPlain, nil, "nil pointer"},
		{"gob/marshal chan", codec.GobCodec{}, true, make(chan int), nil, "codec gob"},
		{"gob/unmarshal nil", codec.GobCodec{}, false, nil, gobPlain, "Unmarshal into nil"},
		{"gob/unmarshal nil pointer", codec.GobCodec{}, false, nilPlain, gobPlain, "nil *benchpb.Plain"},
		{"gob/unmarshal non-pointer", codec.GobCodec{}, false, benchpb.Plain{}, gobPlain, "non-pointer"},
		{"gob/unmarshal empty", codec.GobCodec{}, false, new(benchpb.Plain), nil, "length"},
		{"gob/unmarshal truncated", codec.GobCodec{}, false, new(benchpb.Plain), gobPlain[:len(gobPlain)-1], "length"},
		{"gob/unmarshal lying length", codec.GobCodec{}, false, new(benchpb.Plain), []byte{0xfc, 0x7f, 0xff, 0xff, 0xff, 0x00}, "length"},
		{"gob/unmarshal bad length prefix", codec.GobCodec{}, false, new(benchpb.Plain), []byte{0x80, 0x01}, "length"},
		{"gob/unmarshal trailing", codec.GobCodec{}, false, new(benchpb.Plain), append(bytes.Clone(gobPlain), gobPlain...), "trailing data"},
		{"gob/unmarshal wrong type", codec.GobCodec{}, false, new(int), gobPlain, "codec gob"},

		{"gencode/marshal wrong type", codec.GencodeCodec{}, true, benchpb.New(), nil, "unsupported type *benchpb.BenchmarkMessage (want gencode's"},
		{"gencode/marshal nil", codec.GencodeCodec{}, true, nil, nil, "unsupported type <nil>"},
		{"gencode/marshal nil pointer", codec.GencodeCodec{}, true, nilGen, nil, "codec gencode: encoding *gencodemsg.BenchmarkMessage"},
		{"gencode/unmarshal wrong type", codec.GencodeCodec{}, false, new(benchpb.BenchmarkMessage), gen, "want gencode's generated"},
		{"gencode/unmarshal nil pointer", codec.GencodeCodec{}, false, nilGen, gen, "codec gencode: malformed"},
		{"gencode/unmarshal empty", codec.GencodeCodec{}, false, new(gencodemsg.BenchmarkMessage), nil, "codec gencode: malformed 0-byte payload"},
		{"gencode/unmarshal truncated", codec.GencodeCodec{}, false, new(gencodemsg.BenchmarkMessage), gen[:len(gen)-1], "codec gencode: malformed"},
		{"gencode/unmarshal trailing", codec.GencodeCodec{}, false, new(gencodemsg.BenchmarkMessage), append(bytes.Clone(gen), 0), "read 538 of 539 bytes"},
		{"gencode/unmarshal lying string", codec.GencodeCodec{}, false, new(gencodemsg.BenchmarkMessage), []byte{0xff, 0xff, 0xff, 0x7f, 'a'}, "codec gencode: malformed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			if tt.marshal {
				var b []byte
				b, err = tt.codec.Marshal(tt.v)
				if err != nil && b != nil {
					t.Errorf("Marshal returned %d bytes with an error", len(b))
				}
				dst := []byte("dst")
				got, aerr := codec.MarshalAppend(tt.codec, dst, tt.v)
				if aerr == nil {
					t.Errorf("MarshalAppend: no error")
				} else if string(got) != "dst" {
					t.Errorf("MarshalAppend on error returned %q, want dst unchanged", got)
				}
			} else {
				err = tt.codec.Unmarshal(tt.data, tt.v)
			}
			if err == nil {
				t.Fatalf("no error, want one containing %q", tt.errHas)
			}
			if !strings.Contains(err.Error(), tt.errHas) {
				t.Fatalf("error %q does not contain %q", err, tt.errHas)
			}
		})
	}
}

// TestMsgPackLyingLengthAllocs checks that a payload of a few bytes that
// claims a huge array does not make the decoder allocate for it.
func TestMsgPackLyingLengthAllocs(t *testing.T) {
	payload := []byte{0xdd, 0x0f, 0xff, 0xff, 0xff, 0x01, 0x02}
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	var out []uint64
	err := codec.MsgPackCodec{}.Unmarshal(payload, &out)
	runtime.ReadMemStats(&ms1)
	if err == nil {
		t.Fatal("no error")
	}
	if d := ms1.TotalAlloc - ms0.TotalAlloc; d > 1<<20 {
		t.Fatalf("allocated %d bytes decoding a %d-byte payload", d, len(payload))
	}
}

func TestConcurrent(t *testing.T) {
	cases := []struct {
		c   codec.Codec
		in  any
		out func() any
	}{
		{codec.ProtobufCodec{}, benchpb.New(), func() any { return new(benchpb.BenchmarkMessage) }},
		{codec.JSONCodec{}, benchpb.NewPlain(), func() any { return new(benchpb.Plain) }},
		{codec.MsgPackCodec{}, benchpb.NewPlain(), func() any { return new(benchpb.Plain) }},
		{codec.GobCodec{}, benchpb.NewPlain(), func() any { return new(benchpb.Plain) }},
		{codec.RawCodec{}, []byte("raw"), func() any { return new([]byte) }},
		{codec.GencodeCodec{}, gencodeWithSlice(), func() any { return new(gencodemsg.BenchmarkMessage) }},
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8*len(cases))
	for range 8 {
		for _, tc := range cases {
			wg.Go(func() {
				var buf []byte
				for range 50 {
					var err error
					buf, err = codec.MarshalAppend(tc.c, buf[:0], tc.in)
					if err != nil {
						errs <- err
						return
					}
					out := tc.out()
					if err := tc.c.Unmarshal(buf, out); err != nil {
						errs <- err
						return
					}
					if !equal(out, tc.in) && tc.c.Name() != "raw" {
						errs <- errors.New(tc.c.Name() + ": mismatch")
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
