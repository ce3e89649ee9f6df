package compress_test

import (
	"testing"
)

// benchInputs are the payloads the benchmarks compress: the 581-byte
// protobuf encoding of the benchmark message, and 64 KiB of text.
func benchInputs(b *testing.B) []struct {
	name string
	data []byte
} {
	return []struct {
		name string
		data []byte
	}{
		{"proto581", protoPayload(b)},
		{"text64K", text(64 << 10)},
	}
}

func BenchmarkCompress(b *testing.B) {
	for _, in := range benchInputs(b) {
		for _, a := range all {
			b.Run(a.c.Name()+"/"+in.name, func(b *testing.B) {
				out, err := a.c.Compress(nil, in.data)
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(len(in.data)))
				b.ReportAllocs()
				for b.Loop() {
					if out, err = a.c.Compress(out[:0], in.data); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(out))/float64(len(in.data)), "ratio")
			})
		}
	}
}

func BenchmarkDecompress(b *testing.B) {
	for _, in := range benchInputs(b) {
		for _, a := range all {
			b.Run(a.c.Name()+"/"+in.name, func(b *testing.B) {
				comp, err := a.c.Compress(nil, in.data)
				if err != nil {
					b.Fatal(err)
				}
				var out []byte
				b.SetBytes(int64(len(in.data)))
				b.ReportAllocs()
				for b.Loop() {
					if out, err = a.c.Decompress(out[:0], comp, len(in.data)); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
