package compress

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// Measuring a payload decompresses it into a sink that keeps nothing: a
// counter that stops the decoder once the output passes the limit. Its
// only memory is the decoder's own state (a gzip reader's 32 KiB window; a
// zstd stream decoder's history, at most MaxZstdStreamWindow plus two
// blocks), held by decoders reused from a pool, so a refused bomb costs no
// allocation proportional to its expansion. At most GOMAXPROCS (read at
// first use) measurements run at once, further ones wait for a slot: a
// measurement only uses the CPU, and so many connections measuring bombs
// at once hold at most GOMAXPROCS decoders' state, not one each.

// MaxZstdStreamWindow is the largest window, in bytes, a Zstandard frame
// that declares no content size may declare: 8 MiB, the window of the
// reference encoder up to level 19 without --long and the default of
// github.com/klauspost/compress/zstd's encoder. Such a frame is measured
// with a stream decoder whose history is its window, so the window bounds
// what a measurement holds; a frame over it fails to decompress. Frames
// that declare their content size may use windows up to MaxZstdWindow.
const MaxZstdStreamWindow = 8 << 20

// GzipMeasureAbove is the size, in bytes, above which a gzip trailer's
// claim (ISIZE) is checked by measuring before it is trusted as a bound:
// 64 KiB. ISIZE is written by the sender and may lie; a claim at or below
// this costs at most this much to find false.
const GzipMeasureAbove = 64 << 10

// measureSlots is the semaphore of running measurements.
var measureSlots = sync.OnceValue(func() chan struct{} { return make(chan struct{}, runtime.GOMAXPROCS(0)) })

// measuring counts the measurements running and measuringPeak the most
// seen at once (for tests).
var measuring, measuringPeak atomic.Int32

// acquireMeasure waits for a measurement slot and returns its release.
func acquireMeasure() func() {
	slots := measureSlots()
	slots <- struct{}{}
	n := measuring.Add(1)
	for p := measuringPeak.Load(); n > p && !measuringPeak.CompareAndSwap(p, n); p = measuringPeak.Load() {
	}
	return releaseMeasure
}

func releaseMeasure() {
	measuring.Add(-1)
	<-measureSlots()
}

// errOverLimit stops a measuring decoder at the first byte past the limit.
var errOverLimit = errors.New("over limit")

// counter is an io.Writer that counts and discards, failing with
// errOverLimit once more than limit bytes arrived.
type counter struct{ n, limit int }

func (c *counter) Write(p []byte) (int, error) {
	c.n += len(p)
	if c.n > c.limit {
		return len(p), errOverLimit
	}
	return len(p), nil
}

// zstdMeter is a synchronous zstd stream decoder and its input, reused
// from zstdMeters.
type zstdMeter struct {
	src bytes.Reader
	d   *zstd.Decoder
	cnt counter
}

var zstdMeters = sync.Pool{New: func() any {
	d, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(1), // decode on the caller's goroutine
		zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxWindow(MaxZstdStreamWindow),
		zstd.WithDecodeBuffersBelow(0), // never decode a whole input into memory
	)
	if err != nil {
		panic("compress: zstd meter options: " + err.Error()) // constant options
	}
	return &zstdMeter{d: d}
}}

// measureZstd returns the decoded size of the zstd frames in src, failing
// with ErrTooLarge once it passes limit, without keeping the output.
func measureZstd(src []byte, limit int) (int, error) {
	defer acquireMeasure()()
	m := zstdMeters.Get().(*zstdMeter)
	defer zstdMeters.Put(m)
	m.src.Reset(src)
	m.cnt = counter{limit: limit}
	if err := m.d.Reset(&m.src); err != nil {
		return 0, fmt.Errorf("compress zstd: %w", err)
	}
	_, err := m.d.WriteTo(&m.cnt)
	n := m.cnt.n
	// Drop the input: the pooled meter must not keep the payload alive.
	m.src.Reset(nil)
	_ = m.d.Reset(&m.src)
	switch {
	case errors.Is(err, errOverLimit):
		return 0, tooLarge("zstd", limit)
	case err != nil:
		return 0, fmt.Errorf("compress zstd: %w", err)
	}
	return n, nil
}

// gzipMeter is a gzip reader and its input, reused from gzipMeters.
type gzipMeter struct {
	src bytes.Reader
	r   gzip.Reader
	cnt counter
}

var gzipMeters = sync.Pool{New: func() any { return new(gzipMeter) }}

// measureGzip returns the decoded size of the gzip stream src (all its
// members), failing with ErrTooLarge once it passes limit, without keeping
// the output.
func measureGzip(src []byte, limit int) (int, error) {
	defer acquireMeasure()()
	m := gzipMeters.Get().(*gzipMeter)
	defer gzipMeters.Put(m)
	m.src.Reset(src)
	defer m.src.Reset(nil)
	m.cnt = counter{limit: limit}
	if err := m.r.Reset(&m.src); err != nil {
		return 0, fmt.Errorf("compress gzip: %w", err)
	}
	m.r.Multistream(true)
	_, err := m.r.WriteTo(&m.cnt)
	switch {
	case errors.Is(err, errOverLimit):
		return 0, tooLarge("gzip", limit)
	case err != nil && err != io.EOF:
		return 0, fmt.Errorf("compress gzip: %w", err)
	}
	return m.cnt.n, nil
}
