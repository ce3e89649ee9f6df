package codec_test

import (
	"testing"

	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/internal/benchpb"
)

// benchCase is one codec encoding one form of the benchmark message.
type benchCase struct {
	name  string
	codec codec.Codec
	in    any
	out   func() any
}

func benchCases() []benchCase {
	msg := func() any { return new(benchpb.BenchmarkMessage) }
	plain := func() any { return new(benchpb.Plain) }
	raw, _ := codec.ProtobufCodec{}.Marshal(benchpb.New())
	return []benchCase{
		{"raw", codec.RawCodec{}, raw, func() any { return new([]byte) }},
		{"protobuf", codec.ProtobufCodec{}, benchpb.New(), msg},
		{"json/proto", codec.JSONCodec{}, benchpb.New(), msg},
		{"json/plain", codec.JSONCodec{}, benchpb.NewPlain(), plain},
		{"msgpack/proto", codec.MsgPackCodec{}, benchpb.New(), msg},
		{"msgpack/plain", codec.MsgPackCodec{}, benchpb.NewPlain(), plain},
		{"gob/proto", codec.GobCodec{}, benchpb.New(), msg},
		{"gob/plain", codec.GobCodec{}, benchpb.NewPlain(), plain},
	}
}

// BenchmarkMarshal measures Codec.Marshal, which allocates its result.
func BenchmarkMarshal(b *testing.B) {
	for _, bc := range benchCases() {
		b.Run(bc.name, func(b *testing.B) {
			data, err := bc.codec.Marshal(bc.in)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bc.codec.Marshal(bc.in); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(data)), "bytes/msg")
		})
	}
}

// BenchmarkMarshalAppend measures codec.MarshalAppend into a reused buffer,
// the path the client and server take.
func BenchmarkMarshalAppend(b *testing.B) {
	for _, bc := range benchCases() {
		b.Run(bc.name, func(b *testing.B) {
			buf, err := codec.MarshalAppend(bc.codec, nil, bc.in)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				if buf, err = codec.MarshalAppend(bc.codec, buf[:0], bc.in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkUnmarshal measures Codec.Unmarshal into a new value each time,
// as a server decodes each request into a new argument.
func BenchmarkUnmarshal(b *testing.B) {
	for _, bc := range benchCases() {
		b.Run(bc.name, func(b *testing.B) {
			data, err := bc.codec.Marshal(bc.in)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if err := bc.codec.Unmarshal(data, bc.out()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
