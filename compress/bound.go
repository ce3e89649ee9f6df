package compress

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/klauspost/compress/s2"
)

// Bounder is an optional ability of a Compressor: it reports, from the
// compressed bytes alone and without allocating, an upper bound on the size
// src decompresses to. Servers reserve that many bytes against their memory
// budgets before they decompress, and then decompress with the bound as the
// limit, so that a payload costs no more than what was reserved.
type Bounder interface {
	// DecompressBound returns n, with n <= limit, such that Decompress(dst,
	// src, n) succeeds for every valid src. It fails with an error wrapping
	// ErrTooLarge when src is known to decompress to more than limit bytes,
	// and with another error when src is malformed.
	DecompressBound(src []byte, limit int) (int, error)
}

// DecompressBound returns an upper bound, at most limit, on the size src
// decompresses to with c: c's own bound when it implements Bounder, limit
// otherwise. See Bounder for the errors.
func DecompressBound(c Compressor, src []byte, limit int) (int, error) {
	limit = max(limit, 0)
	if b, ok := c.(Bounder); ok {
		return b.DecompressBound(src, limit)
	}
	return limit, nil
}

// DecompressBound returns the decoded length the Snappy block declares; it
// is exact, so a block over limit fails with ErrTooLarge.
func (SnappyCompressor) DecompressBound(src []byte, limit int) (int, error) {
	n, err := s2.DecodedLen(src)
	if err != nil {
		return 0, fmt.Errorf("compress snappy: %w", err)
	}
	if n > max(limit, 0) {
		return 0, tooLarge("snappy", max(limit, 0))
	}
	return n, nil
}

// DecompressBound returns the sum of the content sizes the frames declare,
// or, for frames that declare none, 128 KiB per compressed block plus the
// size of raw and RLE blocks (RFC 8878, 3.1.1.2). Frames that all declare a
// content size over limit fail with ErrTooLarge. When some frame declares
// no size and that header bound exceeds limit, src is measured: decompressed
// into a counter that keeps nothing, by a pooled stream decoder, so that the
// result is exact and a bomb fails with ErrTooLarge having allocated
// nothing in proportion to its expansion. A frame without a declared size
// whose window exceeds MaxZstdStreamWindow fails as malformed.
func (ZstdCompressor) DecompressBound(src []byte, limit int) (int, error) {
	limit = max(limit, 0)
	bound, exact, err := zstdBound(src)
	if err != nil {
		return 0, fmt.Errorf("compress zstd: %w", err)
	}
	if exact && bound > uint64(limit) {
		return 0, tooLarge("zstd", limit)
	}
	if !exact && bound > uint64(limit) {
		return measureZstd(src, limit)
	}
	return int(bound), nil
}

// errGzipShort reports a gzip payload shorter than a header and trailer.
var errGzipShort = errors.New("stream shorter than a gzip header and trailer")

// DecompressBound returns the size the gzip trailer declares (ISIZE, RFC
// 1952 section 2.3.1) when it is at most GzipMeasureAbove; an ISIZE over
// limit fails with ErrTooLarge. ISIZE is only the sender's claim (and, in a
// stream of several members, the last member's size), so a larger claim is
// checked by measuring: src is decompressed into a counter that keeps
// nothing, by a pooled reader, and the exact size is returned; a stream
// that passes limit fails with ErrTooLarge, one whose trailer does not
// match its content as malformed, without allocating in proportion to the
// expansion.
func (GzipCompressor) DecompressBound(src []byte, limit int) (int, error) {
	limit = max(limit, 0)
	if len(src) < 18 { // 10-byte header, empty deflate block, 8-byte trailer
		return 0, fmt.Errorf("compress gzip: %w", errGzipShort)
	}
	n := uint64(binary.LittleEndian.Uint32(src[len(src)-4:]))
	if n > uint64(limit) {
		return 0, tooLarge("gzip", limit)
	}
	if n > GzipMeasureAbove {
		return measureGzip(src, limit)
	}
	return int(n), nil
}
