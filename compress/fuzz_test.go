package compress_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/fleetrpc/fleet/compress"
)

// FuzzDecompress feeds arbitrary input to every built-in compressor: none
// may panic or return more than the limit, and what zstd accepts must match
// the reference decoder. The seed corpus is in testdata/fuzz/FuzzDecompress.
func FuzzDecompress(f *testing.F) {
	ref, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(1<<20))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(ref.Close)
	f.Add(byte(compress.Zstd), uint16(100), []byte("\x28\xb5\x2f\xfd\x00\x00\x01\x00\x00"))
	f.Fuzz(func(t *testing.T, id byte, limit uint16, data []byte) {
		c := compress.Get(compress.ID(id%3 + 1))
		out, err := c.Decompress([]byte("dst"), data, int(limit))
		if err != nil {
			if string(out) != "dst" {
				t.Fatalf("%s: on error returned %q, want dst", c.Name(), out)
			}
			return
		}
		if string(out[:3]) != "dst" {
			t.Fatalf("%s: lost dst", c.Name())
		}
		if len(out)-3 > int(limit) {
			t.Fatalf("%s: %d bytes out, limit %d", c.Name(), len(out)-3, limit)
		}
		if c.Name() == "zstd" {
			want, err := ref.DecodeAll(data, nil)
			// The reference's 1 MiB memory limit also caps its window,
			// which ours does not; neither error says data is invalid.
			if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
				return
			}
			if err != nil {
				t.Fatalf("zstd: accepted input the reference rejects: %v", err)
			}
			if err == nil && !bytes.Equal(out[3:], want) {
				t.Fatalf("zstd: output differs from the reference decoder")
			}
		}
	})
}
