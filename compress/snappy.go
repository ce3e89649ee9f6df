package compress

import (
	"fmt"
	"slices"

	"github.com/klauspost/compress/s2"
)

// SnappyCompressor is the compressor registered under Snappy. It produces
// the Snappy block format (https://github.com/google/snappy/blob/main/format_description.txt),
// not the framed stream format, with github.com/klauspost/compress/s2 in
// its Snappy-compatible mode, so any Snappy implementation can read the
// output. Decompress also accepts S2 blocks. The block format carries no
// checksum: corruption that keeps a block well formed goes undetected.
//
// A Snappy block starts with its decoded length, so Decompress checks that
// against the limit before it allocates anything, and then allocates exactly
// that much. It keeps no state: the zero value is ready to use and safe for
// concurrent use.
type SnappyCompressor struct{}

// Name returns "snappy".
func (SnappyCompressor) Name() string { return "snappy" }

// Compress appends the Snappy block encoding of src to dst. It fails only
// when src is longer than the format allows (about 4 GiB).
func (SnappyCompressor) Compress(dst, src []byte) ([]byte, error) {
	n := s2.MaxEncodedLen(len(src))
	if n < 0 {
		return dst, fmt.Errorf("compress snappy: %d-byte input is too large for a block", len(src))
	}
	dst = slices.Grow(dst, n)
	enc := s2.EncodeSnappy(dst[len(dst):len(dst)+n], src)
	return dst[:len(dst)+len(enc)], nil
}

// Decompress appends the decoded content of the Snappy block src to dst.
// It fails with an error wrapping ErrTooLarge, before allocating, when the
// block's declared length exceeds limit (a negative limit counts as 0), and
// with another error when src is not a valid block. On error it returns dst
// unchanged.
func (SnappyCompressor) Decompress(dst, src []byte, limit int) ([]byte, error) {
	n, err := s2.DecodedLen(src)
	if err != nil {
		return dst, fmt.Errorf("compress snappy: %w", err)
	}
	if n > max(limit, 0) {
		return dst, tooLarge("snappy", max(limit, 0))
	}
	out := slices.Grow(dst, n)
	if _, err := s2.Decode(out[len(dst):len(dst)+n], src); err != nil {
		return dst, fmt.Errorf("compress snappy: %w", err)
	}
	return out[:len(dst)+n], nil
}
