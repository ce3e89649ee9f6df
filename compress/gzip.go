package compress

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/klauspost/compress/gzip"
)

// GzipCompressor is the compressor registered under Gzip. It produces the
// gzip format of RFC 1952 with github.com/klauspost/compress/gzip (a faster
// drop-in for compress/gzip) at gzip.DefaultCompression, so any gzip
// implementation can read its output; Decompress accepts any gzip stream,
// including several concatenated members, and verifies their CRC-32.
//
// Writers and readers are pooled. Decompress reserves the output size the
// stream's trailer announces (capped at the limit), then reads through a
// bound of limit+1 bytes, so a bomb costs at most about limit bytes before
// it fails with ErrTooLarge. The zero value is ready to use and safe for
// concurrent use.
type GzipCompressor struct{}

// Name returns "gzip".
func (GzipCompressor) Name() string { return "gzip" }

type gzipWriter struct {
	out appendBuf
	w   *gzip.Writer
}

var gzipWriters = sync.Pool{New: func() any {
	g := new(gzipWriter)
	g.w, _ = gzip.NewWriterLevel(&g.out, gzip.DefaultCompression) // the level is valid
	return g
}}

// Compress appends a gzip stream holding src to dst. It fails only if the
// underlying writer does, which appending to memory never makes it do.
func (GzipCompressor) Compress(dst, src []byte) ([]byte, error) {
	g := gzipWriters.Get().(*gzipWriter)
	g.out.b = dst
	g.w.Reset(&g.out)
	_, err := g.w.Write(src)
	if err == nil {
		err = g.w.Close()
	}
	out := g.out.b
	g.out.b = nil
	gzipWriters.Put(g)
	if err != nil {
		return dst, fmt.Errorf("compress gzip: %w", err)
	}
	return out, nil
}

type gzipReader struct {
	src   bytes.Reader
	r     gzip.Reader
	probe [1]byte
}

var gzipReaders = sync.Pool{New: func() any { return new(gzipReader) }}

// Decompress appends the decompressed content of the gzip stream src to
// dst. It fails with an error wrapping ErrTooLarge when the content exceeds
// limit bytes (a negative limit counts as 0), and with another error when
// src is not a valid gzip stream. On error it returns dst unchanged.
func (GzipCompressor) Decompress(dst, src []byte, limit int) ([]byte, error) {
	limit = max(limit, 0)
	g := gzipReaders.Get().(*gzipReader)
	defer gzipReaders.Put(g)
	g.src.Reset(src)
	defer g.src.Reset(nil)
	if err := g.r.Reset(&g.src); err != nil {
		return dst, fmt.Errorf("compress gzip: %w", err)
	}
	g.r.Multistream(true)
	// The trailer's ISIZE is the size of the last member mod 2^32: only a
	// hint, which readLimited caps at limit.
	hint := 0
	if len(src) >= 4 {
		hint = int(binary.LittleEndian.Uint32(src[len(src)-4:]))
	}
	out, err := readLimited("gzip", &g.r, dst, limit, hint, g.probe[:])
	if err != nil {
		return dst, err
	}
	return out, nil
}
