package transport

import (
	"net"
	"runtime"
	"sync"
	"time"
)

// Writer owns the write side of a connection. Many goroutines hand it
// encoded frames with Write; one goroutine (Run) writes everything queued
// since its last write in a single syscall, so concurrent calls are
// coalesced instead of costing a syscall each.
//
// Queued bytes are bounded by MaxPending: writers block while the queue is
// over it, so a peer that stops reading cannot make us buffer without
// limit.
type Writer struct {
	conn         net.Conn
	writeTimeout time.Duration
	maxPending   int

	mu      sync.Mutex
	room    sync.Cond // signalled when the queue drains or the writer fails
	buf     []byte
	spare   []byte
	err     error
	closing bool // flush what is queued, then stop
	writers int  // write syscalls in progress (Run's and WriteNow's)
	urgent  bool // a WriteUrgent frame is queued: write without yielding first

	wake chan struct{}
	done chan struct{}
}

// DefaultMaxPending is the default bound on queued bytes: 4 MiB.
const DefaultMaxPending = 4 << 20

// NewWriter returns a writer for conn. writeTimeout bounds each write
// syscall (0: none); maxPending bounds queued bytes (0: DefaultMaxPending).
func NewWriter(conn net.Conn, writeTimeout time.Duration, maxPending int) *Writer {
	if maxPending <= 0 {
		maxPending = DefaultMaxPending
	}
	// The queue buffers start empty and grow to what the connection
	// needs, so short-lived connections cost little.
	w := &Writer{
		conn:         conn,
		writeTimeout: writeTimeout,
		maxPending:   maxPending,
		wake:         make(chan struct{}, 1),
		done:         make(chan struct{}),
	}
	w.room.L = &w.mu
	return w
}

// Write queues a copy of frame. It blocks while the queue is over its bound
// and returns the writer's error once it has failed or been closed.
func (w *Writer) Write(frame []byte) error {
	w.mu.Lock()
	for len(w.buf) >= w.maxPending && w.err == nil {
		w.room.Wait()
	}
	if w.err != nil {
		err := w.err
		w.mu.Unlock()
		return err
	}
	first := len(w.buf) == 0
	w.buf = append(w.buf, frame...)
	w.mu.Unlock()
	if first {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
	return nil
}

// DirectMax is the largest frame, in bytes, that WriteNow writes itself:
// 64 KiB, which a socket with room takes at once. Larger frames are
// queued, so that their caller does not wait in the syscall for a slow
// peer or link (a queued frame's caller can give up at its deadline).
const DirectMax = 64 << 10

// WriteNow is Write, except that when nothing is queued and no write is
// in progress it writes frame (at most DirectMax bytes) to the connection
// itself, on the calling goroutine, instead of handing it to Run: one
// goroutine hand-off less per frame on a connection that is not busy (one
// call at a time). Frames that arrive meanwhile are queued and written by
// Run. It blocks for the syscall, which waits only when the peer has
// stopped reading and the socket buffers are full (bounded by the write
// timeout), so it is for goroutines that may wait on the peer: a caller, a
// handler. A connection's reading goroutine, which must keep reading while
// the peer cannot, calls it only when something else takes the reading
// over meanwhile: the server runs a serial caller's lone call on the
// reading goroutine (server/inline.go), whose response is written with
// WriteNow there, and its inline monitor hands the reading to a new
// goroutine when the call, this write included, lasts one to two
// milliseconds. Safe for concurrent use with Write and itself.
func (w *Writer) WriteNow(frame []byte) error {
	w.mu.Lock()
	if len(frame) > DirectMax || len(w.buf) > 0 || w.writers > 0 || w.err != nil || w.urgent {
		w.mu.Unlock()
		return w.Write(frame)
	}
	w.writers++
	w.mu.Unlock()
	err := w.write(frame)
	w.mu.Lock()
	w.writers--
	more := len(w.buf) > 0 || w.closing
	w.mu.Unlock()
	if err != nil {
		w.Fail(err) // later writes fail too, and Run stops
		return err
	}
	if more {
		w.kick() // Run writes what queued meanwhile, or ends a closing writer
	}
	return nil
}

// write makes one write syscall of b, under the write timeout.
func (w *Writer) write(b []byte) error {
	if w.writeTimeout > 0 {
		_ = w.conn.SetWriteDeadline(time.Now().Add(w.writeTimeout))
	}
	_, err := w.conn.Write(b)
	return err
}

// WriteUrgent queues a copy of frame as Write does, and has the next
// write go out without first yielding to other goroutines (see Run). For
// frames the peer waits for, such as window updates: a caller that then
// yields (runtime.Gosched) lets Run write them at once instead of after
// the caller's next block.
func (w *Writer) WriteUrgent(frame []byte) error {
	w.mu.Lock()
	w.urgent = true
	w.mu.Unlock()
	return w.Write(frame)
}

// Run writes queued frames until the writer fails or is closed. onTick, if
// not nil, is called every tick (a heartbeat hook); tick 0 disables it. Run
// returns the error that stopped it; it does not close the connection.
func (w *Writer) Run(tick time.Duration, onTick func()) error {
	defer close(w.done)
	var tc <-chan time.Time
	if tick > 0 && onTick != nil {
		t := time.NewTicker(tick)
		defer t.Stop()
		tc = t.C
	}
	for {
		select {
		case <-w.wake:
		case <-tc:
			onTick()
			continue
		}
		// Let goroutines that are ready to queue frames do so before the
		// syscall, so that one write carries many frames; not when an
		// urgent frame waits: its writer yielded to let it out now.
		w.mu.Lock()
		if !w.urgent {
			w.mu.Unlock()
			runtime.Gosched()
			w.mu.Lock()
		}
		w.urgent = false
		b := w.buf
		w.buf = w.spare[:0]
		closing := w.closing
		if w.err != nil && !closing {
			w.mu.Unlock()
			return w.err
		}
		w.room.Broadcast()
		if len(b) > 0 {
			w.writers++
		}
		w.mu.Unlock()
		if len(b) > 0 {
			err := w.write(b)
			w.mu.Lock()
			w.writers--
			w.mu.Unlock()
			if err != nil {
				w.fail(err)
				return err
			}
		}
		// Keep the buffer for the next swap: a connection that queued this
		// much will likely queue it again. Bounded by maxPending.
		if cap(b) <= 2*w.maxPending {
			w.spare = b[:0]
		} else {
			w.spare = nil
		}
		if closing {
			w.mu.Lock()
			empty := len(w.buf) == 0
			waiting := w.writers > 0 // a WriteNow in progress kicks when done
			w.mu.Unlock()
			if empty && !waiting {
				return w.err
			}
			if !waiting {
				w.kick()
			}
		}
	}
}

func (w *Writer) kick() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// fail records err (if none is recorded yet) and releases blocked writers.
func (w *Writer) fail(err error) {
	w.mu.Lock()
	if w.err == nil {
		w.err = err
	}
	w.room.Broadcast()
	w.mu.Unlock()
}

// Fail stops the writer with err without flushing; later Writes return err.
func (w *Writer) Fail(err error) {
	w.fail(err)
	w.kick()
}

// CloseAndFlush refuses further Writes (they return err), writes what is
// already queued, and waits until that is done or timeout passes. It
// reports whether everything queued was written.
func (w *Writer) CloseAndFlush(err error, timeout time.Duration) bool {
	w.mu.Lock()
	if w.err == nil {
		w.err = err
		w.closing = true
	}
	w.room.Broadcast()
	w.mu.Unlock()
	w.kick()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-w.done:
		return true
	case <-t.C:
		return false
	}
}

// Done is closed when Run has returned.
func (w *Writer) Done() <-chan struct{} { return w.done }
