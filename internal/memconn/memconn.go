package memconn

import (
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Network is the network name the ends' addresses report.
const Network = "inprocess"

// DefaultBuffer is the buffer size Pipe uses per direction when given
// none: 256 KiB, the stream window Fleet grants by default, so one
// stream's window fits without the writer waiting for the reader.
const DefaultBuffer = 256 << 10

// Addr is the address of both ends of a Pipe: network "inprocess",
// string "inprocess".
type Addr struct{}

// Network returns "inprocess".
func (Addr) Network() string { return Network }

// String returns "inprocess".
func (Addr) String() string { return Network }

// Pipe returns the two ends of a new connection. What one end writes the
// other reads, in order; each direction buffers up to size bytes (0 or
// less: DefaultBuffer), allocated as the data needs it and released when
// both ends are closed. Both ends are safe for concurrent use: Reads on
// one end take turns, as do Writes, so each Write is delivered
// contiguously, not interleaved with another Write to the same end.
//
// Close of one end delivers what it wrote before to the other end, which
// then reads io.EOF; the closing end discards what it had not read, and
// the other end's later Writes fail with io.ErrClosedPipe. Reads and
// Writes on a closed end fail with net.ErrClosed; past a deadline they
// fail with os.ErrDeadlineExceeded (a net.Error whose Timeout is true).
func Pipe(size int) (*Conn, *Conn) {
	if size <= 0 {
		size = DefaultBuffer
	}
	ab := newHalf(size)
	ba := newHalf(size)
	a := &Conn{rd: ba, wr: ab}
	b := &Conn{rd: ab, wr: ba}
	for _, c := range []*Conn{a, b} {
		c.readDL.init()
		c.writeDL.init()
	}
	return a, b
}

// Conn is one end of a Pipe. It implements net.Conn.
type Conn struct {
	rd, wr  *half // rd: what the peer writes and this end reads; wr: the reverse
	rdMu    sync.Mutex
	wrMu    sync.Mutex
	readDL  deadline
	writeDL deadline
	closed  atomic.Bool
}

// half is one direction of a Pipe: a bounded byte buffer.
type half struct {
	mu      sync.Mutex
	buf     []byte // unread bytes are buf[off:]
	off     int
	max     int  // bound on unread bytes
	wclosed bool // the writing end closed: read the rest, then EOF
	rclosed bool // the reading end closed: writes fail
	// readable and writable hold a token when the reader (or the
	// writer) may have something to do: data or room arrived, or an end
	// closed. Reads and Writes each take turns (rdMu, wrMu), so at most
	// one of each waits; a stale token costs one more look.
	readable, writable chan struct{}
}

func newHalf(size int) *half {
	return &half{max: size, readable: make(chan struct{}, 1), writable: make(chan struct{}, 1)}
}

// wake leaves a token in ch unless one is there.
func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Read reads what the peer wrote, waiting until there is some, the peer
// closes (io.EOF once the buffer is drained), this end closes
// (net.ErrClosed) or the read deadline passes (os.ErrDeadlineExceeded).
func (c *Conn) Read(p []byte) (int, error) {
	c.rdMu.Lock()
	defer c.rdMu.Unlock()
	h := c.rd
	for {
		dl := c.readDL.wait()
		select {
		case <-dl:
			return 0, os.ErrDeadlineExceeded
		default:
		}
		h.mu.Lock()
		if h.rclosed {
			h.mu.Unlock()
			return 0, net.ErrClosed
		}
		if unread := len(h.buf) - h.off; unread > 0 || len(p) == 0 {
			n := copy(p, h.buf[h.off:])
			h.off += n
			if h.off == len(h.buf) {
				h.buf, h.off = h.buf[:0], 0
				if h.wclosed {
					h.buf = nil
				}
			}
			h.mu.Unlock()
			if n > 0 {
				wake(h.writable)
			}
			return n, nil
		}
		if h.wclosed {
			h.mu.Unlock()
			return 0, io.EOF
		}
		h.mu.Unlock()
		select {
		case <-h.readable:
		case <-dl:
		}
	}
}

// Write buffers p for the peer, waiting while the buffer is full. It
// fails with net.ErrClosed once this end is closed, io.ErrClosedPipe once
// the peer is, and os.ErrDeadlineExceeded past the write deadline; n is
// then the number of bytes buffered before.
func (c *Conn) Write(p []byte) (int, error) {
	c.wrMu.Lock()
	defer c.wrMu.Unlock()
	h := c.wr
	n := 0
	for {
		dl := c.writeDL.wait()
		select {
		case <-dl:
			return n, os.ErrDeadlineExceeded
		default:
		}
		h.mu.Lock()
		if h.wclosed {
			h.mu.Unlock()
			return n, net.ErrClosed
		}
		if h.rclosed {
			h.mu.Unlock()
			return n, io.ErrClosedPipe
		}
		unread := len(h.buf) - h.off
		if room := h.max - unread; room > 0 && n < len(p) {
			chunk := min(room, len(p)-n)
			h.reserve(unread, chunk)
			h.buf = append(h.buf, p[n:n+chunk]...)
			n += chunk
			wake(h.readable)
		}
		if n == len(p) {
			h.mu.Unlock()
			return n, nil
		}
		h.mu.Unlock()
		select {
		case <-h.writable:
		case <-dl:
		}
	}
}

// reserve makes room for chunk more bytes after the unread ones, moving
// them to the front or growing the buffer (doubling, at most to h.max).
// Called with h.mu held.
func (h *half) reserve(unread, chunk int) {
	if len(h.buf)+chunk <= cap(h.buf) {
		return
	}
	if unread+chunk <= cap(h.buf) && h.off > 0 {
		copy(h.buf, h.buf[h.off:])
		h.buf, h.off = h.buf[:unread], 0
		return
	}
	size := max(2*cap(h.buf), unread+chunk, 4<<10)
	size = min(size, max(h.max, unread+chunk))
	nb := make([]byte, unread, size)
	copy(nb, h.buf[h.off:])
	h.buf, h.off = nb, 0
}

// Close closes this end: the peer reads what this end wrote, then
// io.EOF; what this end had not read is discarded, and the peer's Writes
// fail from then on. Blocked Reads and Writes on this end return
// net.ErrClosed. It returns nil, and net.ErrClosed when called again.
func (c *Conn) Close() error {
	if c.closed.Swap(true) {
		return net.ErrClosed
	}
	c.wr.mu.Lock()
	c.wr.wclosed = true
	if c.wr.off == len(c.wr.buf) {
		c.wr.buf, c.wr.off = nil, 0
	}
	c.wr.mu.Unlock()
	wake(c.wr.readable)
	wake(c.wr.writable)
	c.rd.mu.Lock()
	c.rd.rclosed = true
	c.rd.buf, c.rd.off = nil, 0
	c.rd.mu.Unlock()
	wake(c.rd.readable)
	wake(c.rd.writable)
	c.readDL.stop()
	c.writeDL.stop()
	return nil
}

// LocalAddr returns Addr{}.
func (c *Conn) LocalAddr() net.Addr { return Addr{} }

// RemoteAddr returns Addr{}.
func (c *Conn) RemoteAddr() net.Addr { return Addr{} }

// SetDeadline sets the read and write deadlines; the zero time clears
// them. It fails with net.ErrClosed after Close.
func (c *Conn) SetDeadline(t time.Time) error {
	if c.closed.Load() {
		return net.ErrClosed
	}
	c.readDL.set(t)
	c.writeDL.set(t)
	return nil
}

// SetReadDeadline sets the read deadline; the zero time clears it. A
// Read waiting when it passes returns os.ErrDeadlineExceeded. It fails
// with net.ErrClosed after Close.
func (c *Conn) SetReadDeadline(t time.Time) error {
	if c.closed.Load() {
		return net.ErrClosed
	}
	c.readDL.set(t)
	return nil
}

// SetWriteDeadline sets the write deadline; the zero time clears it. A
// Write waiting for room when it passes returns os.ErrDeadlineExceeded.
// It fails with net.ErrClosed after Close.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	if c.closed.Load() {
		return net.ErrClosed
	}
	c.writeDL.set(t)
	return nil
}

// deadline is a settable point in time with a channel closed when it
// passes. One timer is made the first time a deadline is set, and reset
// for later ones, so setting a deadline per write does not allocate.
type deadline struct {
	mu    sync.Mutex
	when  time.Time // zero: none
	ch    chan struct{}
	fired bool // ch is closed
	timer *time.Timer
}

func (d *deadline) init() { d.ch = make(chan struct{}) }

// wait returns the channel closed when the current deadline passes.
func (d *deadline) wait() <-chan struct{} {
	d.mu.Lock()
	ch := d.ch
	d.mu.Unlock()
	return ch
}

// set moves the deadline to t (zero: none).
func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.when = t
	if d.timer != nil {
		d.timer.Stop()
	}
	if d.fired {
		d.ch, d.fired = make(chan struct{}), false
	}
	if t.IsZero() {
		return
	}
	dur := time.Until(t)
	if dur <= 0 {
		close(d.ch)
		d.fired = true
		return
	}
	if d.timer == nil {
		d.timer = time.AfterFunc(dur, d.expire)
	} else {
		d.timer.Reset(dur)
	}
}

// expire runs on the timer: it closes the channel if the deadline has
// passed. A firing for a deadline that set has since moved later (the
// timer had started before set could stop it) re-arms the timer instead.
func (d *deadline) expire() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fired || d.when.IsZero() {
		return
	}
	if left := time.Until(d.when); left > 0 {
		d.timer.Reset(left)
		return
	}
	close(d.ch)
	d.fired = true
}

// stop stops the timer, for Close.
func (d *deadline) stop() {
	d.mu.Lock()
	if d.timer != nil {
		d.timer.Stop()
	}
	d.mu.Unlock()
}
