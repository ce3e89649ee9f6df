package compress_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"testing"

	"github.com/fleetrpc/fleet/compress"
	"github.com/klauspost/compress/zstd"
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

// zstdNoSize compresses data as one zstd stream whose frame declares no
// content size, in blocks of at most 128 KiB.
func zstdNoSize(t *testing.T, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	w, err := zstd.NewWriter(&b, zstd.WithWindowSize(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// zstdRLEBomb is a zstd frame without a content size, a 1 MiB window and
// n RLE blocks of 128 KiB (RFC 8878, 3.1.1.2): 4n+6 bytes that decode to
// n*128 KiB.
func zstdRLEBomb(n int, window byte) []byte {
	b := []byte{0x28, 0xB5, 0x2F, 0xFD, 0x00, window}
	for i := range n {
		h := uint32(128<<10)<<3 | 1<<1
		if i == n-1 {
			h |= 1
		}
		b = append(b, byte(h), byte(h>>8), byte(h>>16), 'x')
	}
	return b
}

// allocatedPerRun returns the bytes fn allocates per run, after a first
// run that fills the pools.
func allocatedPerRun(runs int, fn func()) uint64 {
	fn()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		fn()
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / uint64(runs)
}

// TestDecompressBoundMeasures: a zstd frame without a content size whose
// header bound passes the limit, and a gzip stream whose trailer claims
// more than GzipMeasureAbove, are measured: the bound is exact when the
// content fits, and a bomb fails with ErrTooLarge having allocated nothing
// in proportion to its expansion.
func TestDecompressBoundMeasures(t *testing.T) {
	data := bytes.Repeat([]byte("fleet measures "), 10000) // 150,000 bytes
	const limit = 200 << 10                                // under the header bound of two blocks (256 KiB)
	z := zstdNoSize(t, data)
	if n, err := compress.DecompressBound(compress.ZstdCompressor{}, z, limit); err != nil || n != len(data) {
		t.Errorf("zstd without a size: bound %d, %v; want exactly %d", n, err, len(data))
	}
	if n, err := compress.DecompressBound(compress.ZstdCompressor{}, z, 100<<10); !errors.Is(err, compress.ErrTooLarge) {
		t.Errorf("zstd without a size over the limit: bound %d, %v; want ErrTooLarge", n, err)
	}
	g, _ := compress.GzipCompressor{}.Compress(nil, data)
	if n, err := compress.DecompressBound(compress.GzipCompressor{}, g, limit); err != nil || n != len(data) {
		t.Errorf("gzip: bound %d, %v; want exactly %d", n, err, len(data))
	}
	// A trailer that claims more than the content (over
	// GzipMeasureAbove) does not match it: malformed, not too large.
	lying := bytes.Clone(g)
	binary.LittleEndian.PutUint32(lying[len(lying)-4:], 180<<10)
	if _, err := compress.DecompressBound(compress.GzipCompressor{}, lying, limit); err == nil || errors.Is(err, compress.ErrTooLarge) {
		t.Errorf("gzip whose trailer claims 180 KiB: %v, want a malformed-stream error", err)
	}

	const bombLimit = 4 << 20
	zBomb := zstdRLEBomb(8192, 10<<3) // 32 KiB -> 1 GiB
	gBomb, _ := compress.GzipCompressor{}.Compress(nil, make([]byte, 32<<20))
	binary.LittleEndian.PutUint32(gBomb[len(gBomb)-4:], bombLimit) // claims to fit exactly
	for _, tc := range []struct {
		c   compress.Compressor
		src []byte
	}{{compress.ZstdCompressor{}, zBomb}, {compress.GzipCompressor{}, gBomb}} {
		var err error
		per := allocatedPerRun(10, func() { _, err = compress.DecompressBound(tc.c, tc.src, bombLimit) })
		if !errors.Is(err, compress.ErrTooLarge) {
			t.Errorf("%s bomb: %v, want ErrTooLarge", tc.c.Name(), err)
		}
		t.Logf("%s bomb of %d bytes: %d bytes allocated per refusal", tc.c.Name(), len(tc.src), per)
		// Nothing in proportion to the expansion (1 GiB, 32 MiB) or the
		// limit (4 MiB, what a refusal used to allocate): a meter taken
		// from the pool allocates nothing; under the race detector the
		// pool drops meters, and a new zstd meter allocates its history
		// (the frame's 1 MiB window plus two blocks) once, at most once
		// per refusal.
		want := uint64(64 << 10)
		if raceEnabled {
			want = 2 << 20
		}
		if per > want {
			t.Errorf("%s bomb: %d bytes allocated per refusal, want at most %d", tc.c.Name(), per, want)
		}
	}

	// A frame without a content size may not declare a window over
	// MaxZstdStreamWindow: 16 MiB here.
	if _, err := compress.DecompressBound(compress.ZstdCompressor{}, zstdRLEBomb(64, 14<<3), bombLimit); err == nil || errors.Is(err, compress.ErrTooLarge) {
		t.Errorf("16 MiB window without a content size: %v, want malformed", err)
	}
	if _, err := (compress.ZstdCompressor{}).Decompress(nil, zstdRLEBomb(2, 14<<3), bombLimit); err == nil {
		t.Error("Decompress accepted a 16 MiB window without a content size")
	}
}
