package compress_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/fleetrpc/fleet/compress"
)

// TestDecompressBound: the bound of each built-in compressor covers the
// real size, stays within the limit, and refuses what is known to break it.
func TestDecompressBound(t *testing.T) {
	data := bytes.Repeat([]byte("fleet "), 20000) // 120,000 bytes
	for _, c := range []compress.Compressor{compress.GzipCompressor{}, compress.SnappyCompressor{}, compress.ZstdCompressor{}} {
		enc, err := c.Compress(nil, data)
		if err != nil {
			t.Fatal(err)
		}
		n, err := compress.DecompressBound(c, enc, 1<<20)
		if err != nil || n < len(data) || n > 1<<20 {
			t.Errorf("%s: bound %d, %v; want >= %d and <= 1 MiB", c.Name(), n, err, len(data))
		}
		out, err := c.Decompress(nil, enc, n)
		if err != nil || !bytes.Equal(out, data) {
			t.Errorf("%s: decompress within the bound: %v", c.Name(), err)
		}
		if _, err := compress.DecompressBound(c, enc, 1000); !errors.Is(err, compress.ErrTooLarge) {
			t.Errorf("%s: bound under a 1000-byte limit: %v, want ErrTooLarge", c.Name(), err)
		}
	}
	// A gzip trailer that understates the size caps the decompression.
	enc, _ := compress.GzipCompressor{}.Compress(nil, data)
	binary.LittleEndian.PutUint32(enc[len(enc)-4:], 10)
	n, err := compress.DecompressBound(compress.GzipCompressor{}, enc, 1<<20)
	if err != nil || n != 10 {
		t.Fatalf("lying gzip trailer: bound %d, %v", n, err)
	}
	if _, err := (compress.GzipCompressor{}).Decompress(nil, enc, n); !errors.Is(err, compress.ErrTooLarge) {
		t.Fatalf("lying gzip trailer: %v, want ErrTooLarge", err)
	}
	if _, err := compress.DecompressBound(compress.GzipCompressor{}, []byte{1, 2}, 100); err == nil {
		t.Fatal("short gzip: no error")
	}
}
