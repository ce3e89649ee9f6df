package compress_test

import (
	"testing"

	"github.com/fleetrpc/fleet/compress"
)

// FuzzDecompressBound: for arbitrary input, every built-in compressor's
// bound stays within the limit, and for snappy and zstd it really bounds
// what Decompress yields under the limit, and refuses (ErrTooLarge) only
// input that Decompress refuses too. (A gzip trailer may lie; the server
// then decompresses with the bound as the limit and the call fails.) The
// seed corpus is in testdata/fuzz/FuzzDecompressBound.
func FuzzDecompressBound(f *testing.F) {
	for _, c := range []compress.Compressor{compress.GzipCompressor{}, compress.SnappyCompressor{}, compress.ZstdCompressor{}} {
		enc, _ := c.Compress(nil, []byte("fleet fleet fleet fleet fleet fleet"))
		id := map[string]byte{"gzip": 0, "snappy": 1, "zstd": 2}[c.Name()]
		f.Add(id, uint16(100), enc)
		f.Add(id, uint16(10), enc)
	}
	f.Fuzz(func(t *testing.T, id byte, limit uint16, data []byte) {
		c := compress.Get(compress.ID(id%3 + 1))
		n, berr := compress.DecompressBound(c, data, int(limit))
		if berr == nil && (n < 0 || n > int(limit)) {
			t.Fatalf("%s: bound %d outside [0, %d]", c.Name(), n, limit)
		}
		if c.Name() == "gzip" {
			return
		}
		out, err := c.Decompress(nil, data, int(limit))
		if err != nil {
			return
		}
		if berr != nil {
			t.Fatalf("%s: bound refused (%v) input that decompresses to %d bytes within %d", c.Name(), berr, len(out), limit)
		}
		if len(out) > n {
			t.Fatalf("%s: %d bytes out, over the bound %d", c.Name(), len(out), n)
		}
	})
}
