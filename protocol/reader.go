package protocol

import (
	"bufio"
	"io"
	"sync"

	"github.com/fleetrpc/fleet/internal/bufpool"
)

// Reader reads frames from a byte stream. It is not safe for concurrent
// use: one goroutine reads a connection.
type Reader struct {
	r   *bufio.Reader
	lim Limits
	// prefix receives each frame's length prefix. A field rather than a
	// local: passed to io.ReadFull, a local array escapes and costs an
	// allocation per frame.
	prefix [PrefixSize]byte
}

// DefaultReadBufferSize is the read buffer of a Reader made with size 0.
const DefaultReadBufferSize = 32 << 10

// readers pools read buffers of the default size across connections.
var readers sync.Pool

// NewReader returns a Reader over r with a read buffer of bufSize bytes
// (DefaultReadBufferSize when 0) and the given limits (defaults applied).
// Call Close when done with it to recycle its buffer.
func NewReader(r io.Reader, bufSize int, l Limits) *Reader {
	if bufSize <= 0 {
		bufSize = DefaultReadBufferSize
	}
	var br *bufio.Reader
	if bufSize == DefaultReadBufferSize {
		if p, _ := readers.Get().(*bufio.Reader); p != nil {
			p.Reset(r)
			br = p
		}
	}
	if br == nil {
		br = bufio.NewReaderSize(r, bufSize)
	}
	return &Reader{r: br, lim: l.WithDefaults()}
}

// Close recycles the reader's buffer. The Reader must not be used after.
func (r *Reader) Close() {
	if r.r != nil && r.r.Size() == DefaultReadBufferSize {
		r.r.Reset(nil)
		readers.Put(r.r)
	}
	r.r = nil
}

// Limits returns the limits the reader enforces, defaults applied.
func (r *Reader) Limits() *Limits { return &r.lim }

// Buffered reports how many bytes are already read from the stream and
// waiting in the buffer.
func (r *Reader) Buffered() int { return r.r.Buffered() }

// firstChunk is the most a frame buffer starts with. Larger frames grow
// through the pool's classes, doubling as their bytes arrive, so a peer
// that announces a large frame and sends little makes us allocate at most
// about twice what it sent.
const firstChunk = 64 << 10

// ReadFrame reads and parses the next frame. The returned buffer holds the
// frame's bytes (the Frame's slices point into it) and comes from Fleet's
// internal buffer pool: Fleet's client and server give it back once the
// frame is no longer used; other callers may simply drop it. Any
// error other than io.EOF on a frame boundary is fatal to the stream: the
// length prefix is checked against the limits before any allocation, and a
// frame that breaks a limit or does not parse yields a *fleet.Error.
func (r *Reader) ReadFrame() (Frame, *[]byte, error) {
	if _, err := io.ReadFull(r.r, r.prefix[:]); err != nil {
		if err == io.ErrUnexpectedEOF {
			err = malformed("stream ended inside a length prefix")
		}
		return Frame{}, nil, err
	}
	n, err := FrameSize(r.prefix, &r.lim)
	if err != nil {
		return Frame{}, nil, err
	}
	bp := bufpool.Get(min(n, firstChunk))
	b := *bp
	for len(b) < n {
		if len(b) == cap(b) {
			nbp := bufpool.Get(min(n, 2*cap(b)))
			*nbp = append((*nbp)[:0], b...)
			*bp = b
			bufpool.Put(bp)
			bp, b = nbp, *nbp
		}
		m, err := r.r.Read(b[len(b):min(n, cap(b))])
		b = b[:len(b)+m]
		if err != nil && len(b) < n {
			*bp = b
			bufpool.Put(bp)
			if err == io.EOF {
				err = malformed("stream ended inside a frame")
			}
			return Frame{}, nil, err
		}
	}
	*bp = b
	f, err := Parse(b, &r.lim)
	if err != nil {
		bufpool.Put(bp)
		return Frame{}, nil, err
	}
	return f, bp, nil
}
