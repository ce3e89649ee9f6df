package flow

import (
	"io"
	"sync"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/internal/bufpool"
	"github.com/fleetrpc/fleet/protocol"
)

// Credit is a sender's credit on one stream, in bytes. Safe for
// concurrent use.
type Credit struct {
	mu    sync.Mutex
	avail int64
	full  int64 // the initial window: with this much credit nothing is outstanding
	wake  chan struct{}
}

// NewCredit returns a credit of window bytes (at least 1).
func NewCredit(window int64) *Credit {
	window = max(window, 1)
	return &Credit{avail: window, full: window, wake: make(chan struct{}, 1)}
}

// Acquire waits until n bytes may be sent and takes them: when the credit
// covers n, or when at most half the window (window/2, rounded down) is
// outstanding, whatever n (then the credit may turn negative). The second
// case is what lets a message larger than the credit go: a receiver may
// wait until half the window is consumed before it grants (Fleet's own
// receivers grant after a quarter, see GrantDivisor; revision 2 peers
// before them after half), so a sender that waited for more than that
// could wait for ever. It returns false, taking nothing, once done is
// closed.
func (c *Credit) Acquire(n int64, done <-chan struct{}) bool {
	for {
		c.mu.Lock()
		if mayTake(c.avail, c.full, n) {
			c.avail -= n
			c.mu.Unlock()
			return true
		}
		c.mu.Unlock()
		select {
		case <-c.wake:
		case <-done:
			return false
		}
	}
}

// mayTake is the sender's rule for a message of n bytes against a credit
// of avail bytes in a window of full: the credit covers it, or at most half
// the window is outstanding (see Credit.Acquire).
func mayTake(avail, full, n int64) bool { return avail >= n || full-avail <= full/2 }

// Add returns n bytes of credit (a window update from the receiver) and
// wakes a waiting sender. The credit is capped at protocol.MaxWindow.
func (c *Credit) Add(n int64) {
	c.mu.Lock()
	c.avail = min(c.avail+n, protocol.MaxWindow)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Available returns the current credit in bytes (negative after a message
// larger than the window).
func (c *Credit) Available() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.avail
}

// Msg is one received message: its frame and the pooled buffer holding
// it. Release the buffer with bufpool.Put when done.
type Msg struct {
	Frame protocol.Frame
	Buf   *[]byte
}

// Inbox queues the messages received on one stream until the consumer
// takes them. Push never blocks (the connection's read loop calls it);
// what it holds is bounded by the window the receiver granted, and a
// sender that overruns it gets an error. Safe for concurrent use.
type Inbox struct {
	mu          sync.Mutex
	q           []Msg
	head        int
	wake        chan struct{}
	end         error // io.EOF after the peer's half-close, or why the stream failed
	window      int64
	maxMsg      int64
	outstanding int64 // bytes received and not yet granted back
	consumed    int64 // bytes consumed since the last grant
	held        int64 // bytes of payload queued

	// Release, when set before the first Push, takes each queued message
	// that Abort drops, instead of bufpool.Put: a receiver that charges
	// queued messages to a memory budget gives the bytes back there.
	Release func(Msg)
}

// NewInbox returns an inbox granting window bytes and accepting messages
// of at most maxMsg bytes.
func NewInbox(window, maxMsg int64) *Inbox {
	return &Inbox{window: max(window, 1), maxMsg: maxMsg, wake: make(chan struct{}, 1)}
}

// Push queues a message. It fails with ResourceExhausted, queueing
// nothing (the caller releases the buffer and resets the stream), when
// the message is over the size limit or the sender overran the window
// (more than half the window was outstanding and the message takes the
// outstanding bytes past the window; see Credit.Acquire), and with
// FailedPrecondition after the stream ended or half-closed. What it holds
// is at most max(window, window/2+maxMsg) bytes of payload.
func (in *Inbox) Push(m Msg) error {
	n := int64(len(m.Frame.Payload))
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.end != nil {
		return fleet.NewError(fleet.FailedPrecondition, "stream message after the stream ended")
	}
	if n > in.maxMsg {
		return fleet.Errorf(fleet.ResourceExhausted, "stream message of %d bytes exceeds limit %d", n, in.maxMsg)
	}
	if in.outstanding > in.window/2 && in.outstanding+n > in.window {
		return fleet.Errorf(fleet.ResourceExhausted, "stream flow-control window of %d bytes overrun", in.window)
	}
	in.outstanding += n
	in.held += n
	in.q = append(in.q, m)
	in.signal()
	return nil
}

func (in *Inbox) signal() {
	select {
	case in.wake <- struct{}{}:
	default:
	}
}

// Close ends the inbox: err is io.EOF for the peer's half-close or the
// stream's failure. Queued messages are still delivered, then err. Only
// the first Close counts.
func (in *Inbox) Close(err error) {
	in.mu.Lock()
	if in.end == nil {
		in.end = err
	}
	in.mu.Unlock()
	in.signal()
}

// Abort ends the inbox with err and drops queued messages.
func (in *Inbox) Abort(err error) {
	in.mu.Lock()
	if in.end == nil || in.end == io.EOF {
		in.end = err
	}
	q := in.q[in.head:]
	in.q, in.head, in.held = nil, 0, 0
	in.mu.Unlock()
	for _, m := range q {
		if in.Release != nil {
			in.Release(m)
		} else {
			bufpool.Put(m.Buf)
		}
	}
	in.signal()
}

// GrantDivisor sets when a receiver grants credit back: once the consumer
// has taken window/GrantDivisor bytes (at least 1) since the last window
// update. A quarter, as grpc-go's inbound flow control does, keeps three
// quarters of the window in flight while the update travels back, so a
// fast producer is rarely stopped by a round trip; a half (what Fleet did
// before) left only half, and the consumer of a saturated stream
// often found its queue empty. The wire format does not change and
// senders need nothing: any peer accepts more frequent window updates.
const GrantDivisor = 4

// Next waits for the next message. grant, when positive, is the credit
// the caller must send back to the peer in a window update (granted once
// window/GrantDivisor bytes were consumed since the last grant). err is
// the inbox's end (io.EOF or the failure) once it is empty, or abort's
// error when abort is closed first.
func (in *Inbox) Next(abort <-chan struct{}, abortErr func() error) (m Msg, grant int64, err error) {
	for {
		in.mu.Lock()
		if in.head < len(in.q) {
			m = in.q[in.head]
			in.q[in.head] = Msg{}
			in.head++
			if in.head == len(in.q) {
				in.q, in.head = in.q[:0], 0
			}
			n := int64(len(m.Frame.Payload))
			in.held -= n
			in.consumed += n
			if in.consumed >= max(in.window/GrantDivisor, 1) {
				grant = in.consumed
				in.outstanding -= grant
				in.consumed = 0
			}
			in.mu.Unlock()
			return m, grant, nil
		}
		end := in.end
		in.mu.Unlock()
		if end != nil {
			return Msg{}, 0, end
		}
		select {
		case <-in.wake:
		case <-abort:
			return Msg{}, 0, abortErr()
		}
	}
}

// Held returns the bytes of message payload queued and not yet consumed.
func (in *Inbox) Held() int64 {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.held
}

// ConnCredit is a sender's connection-wide credit, in bytes of stream
// message payload: every stream of a connection takes its messages from
// it as well as from its own Credit (docs/protocol.md, "Flow control").
// Unlike Credit it wakes every waiting sender when credit returns, since
// many streams may wait on it at once. Safe for concurrent use.
type ConnCredit struct {
	mu    sync.Mutex
	avail int64
	full  int64
	wake  chan struct{} // closed and replaced by Add
}

// NewConnCredit returns a connection credit of window bytes (at least 1).
func NewConnCredit(window int64) *ConnCredit {
	window = max(window, 1)
	return &ConnCredit{avail: window, full: window, wake: make(chan struct{})}
}

// Acquire waits until n bytes may be sent and takes them, by the rule of
// Credit.Acquire (the credit covers n, or at most half the window is
// outstanding). It returns false, taking nothing, once done is closed.
// A nil ConnCredit (no connection window) grants at once.
func (c *ConnCredit) Acquire(n int64, done <-chan struct{}) bool {
	if c == nil {
		return true
	}
	for {
		c.mu.Lock()
		if mayTake(c.avail, c.full, n) {
			c.avail -= n
			c.mu.Unlock()
			return true
		}
		wake := c.wake
		c.mu.Unlock()
		select {
		case <-wake:
		case <-done:
			return false
		}
	}
}

// Add returns n bytes of credit (a connection window update) and wakes
// every waiting sender. The credit is capped at protocol.MaxWindow.
func (c *ConnCredit) Add(n int64) {
	c.mu.Lock()
	c.avail = min(c.avail+n, protocol.MaxWindow)
	close(c.wake)
	c.wake = make(chan struct{})
	c.mu.Unlock()
}

// Available returns the current credit in bytes.
func (c *ConnCredit) Available() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.avail
}

// ConnWindow is a receiver's connection-wide window: it counts the stream
// message payload bytes the connection's read loop accepted and grants
// them back once a quarter of the window (GrantDivisor) has arrived since
// the last grant. It grants on receipt, not on consumption, as grpc-go's
// inbound connection flow control (trInFlow) does: each stream's window
// already bounds what that stream buffers, and granting on consumption
// would let one stalled consumer stop every stream. Because every byte
// read is granted back at once, a receiver cannot tell a sender that
// ignores the window from a fast one, so Receive reports no overrun (the
// stream windows, enforced by Inbox.Push, bound what a misbehaving sender
// makes the receiver hold). Only the read loop calls it.
type ConnWindow struct {
	window      int64
	outstanding int64 // bytes received and not yet granted back
}

// NewConnWindow returns a receiver's connection window of window bytes
// (at least 1).
func NewConnWindow(window int64) *ConnWindow {
	return &ConnWindow{window: max(window, 1)}
}

// Receive counts a stream data frame of n payload bytes. grant, when
// positive, is what the caller must send back in a connection window
// update (at most protocol.MaxWindow; the rest stays counted).
func (w *ConnWindow) Receive(n int64) (grant int64) {
	w.outstanding += n
	if w.outstanding >= max(w.window/GrantDivisor, 1) {
		grant = min(w.outstanding, protocol.MaxWindow)
		w.outstanding -= grant
	}
	return grant
}
