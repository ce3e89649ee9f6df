package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/internal/bufpool"
	"github.com/fleetrpc/fleet/internal/flow"
	"github.com/fleetrpc/fleet/protocol"
)

// connExt is a connection's state for protocol revision 2: what the
// client announced in its Hello, the highest request sequence id read,
// and the calls and streams a cancel frame can reach.
type connExt struct {
	peerCaps atomic.Uint32 // capabilities of the client's Hello (0: revision 1 client)
	lastSeq  atomic.Uint64 // highest request sequence id read
	spoke    atomic.Bool   // a valid frame arrived: the peer speaks Fleet
	// peerWindow is the stream window the client's Hello granted: the
	// server's initial send credit per stream.
	peerWindow atomic.Int64
	// Connection flow control, set from the client's first Hello when
	// both sides announce SettingConnWindow (nil otherwise): connCredit
	// is the send credit the client granted (read by stream handlers),
	// connWin the window the server grants (read loop only).
	connCredit atomic.Pointer[flow.ConnCredit]
	connWin    *flow.ConnWindow
	helloSeen  bool // read loop only

	mu      sync.Mutex
	running map[uint64]*lazyCancelCtx // cancellable unary calls by seq
	streams map[uint64]*serverStream  // open streams by id
	waiting map[uint64]chan struct{}  // calls in the adaptive limit's backlog by seq; closed by a cancel frame
}

// serverCaps is what this server announces.
const serverCaps = protocol.CapCancel | protocol.CapStreams

// onPing answers a ping; a ping with FlagHello gets a pong with this
// server's Hello, and records the client's capabilities.
func (c *conn) onPing(f protocol.Frame, buf *[]byte) {
	c.ext.spoke.Store(true)
	var payload []byte
	flags := protocol.Flags(0)
	if f.Flags&protocol.FlagHello != 0 {
		if h, err := protocol.ParseHello(f.Payload); err == nil {
			c.ext.peerCaps.Store(h.Capabilities & serverCaps)
			c.ext.peerWindow.Store(int64(h.Setting(protocol.SettingStreamWindow, DefaultStreamWindow, protocol.MaxWindow)))
			flags = protocol.FlagHello
			so := c.s.opts.stream.withDefaults()
			settings := map[uint64]uint64{
				protocol.SettingStreamWindow: uint64(so.window),
				protocol.SettingMaxStreams:   uint64(so.maxStreams),
				protocol.SettingMaxMessage:   uint64(so.maxMessage),
			}
			if so.connWindow > 0 {
				settings[protocol.SettingConnWindow] = uint64(so.connWindow)
				// Only the first Hello sets the connection window up.
				if peer := h.Setting(protocol.SettingConnWindow, 0, protocol.MaxWindow); !c.ext.helloSeen && peer > 0 && h.Capabilities&protocol.CapStreams != 0 {
					c.ext.connWin = flow.NewConnWindow(int64(so.connWindow))
					c.ext.connCredit.Store(flow.NewConnCredit(int64(peer)))
				}
			}
			c.ext.helloSeen = true
			payload = protocol.AppendHello(make([]byte, 0, 32), &protocol.Hello{
				Revision: protocol.Revision, Capabilities: serverCaps, Settings: settings,
			})
		}
		// A Hello that does not parse is answered as a revision 1 peer
		// would: a plain pong; the client then uses no capability.
	}
	seq := f.Seq
	bufpool.Put(buf)
	_ = c.w.Write(protocol.AppendControl(make([]byte, 0, protocol.HeaderSize+3+len(payload)), protocol.TypePong, flags, seq, payload))
}

// onExtension handles frames the revision 1 read loop did not know.
// Frames of unknown types, and stray pongs and responses, are ignored. It
// returns a protocol error that ends the connection (a malformed
// connection window update).
func (c *conn) onExtension(f protocol.Frame, buf *[]byte) error {
	c.ext.spoke.Store(true)
	switch f.Type {
	case protocol.TypeCancel:
		seq := f.Seq
		bufpool.Put(buf)
		c.cancelSeq(seq)
	case protocol.TypeStreamOpen, protocol.TypeStreamData, protocol.TypeWindowUpdate:
		return c.onStreamFrame(f, buf)
	default:
		bufpool.Put(buf)
	}
	return nil
}

// noteSeq records a request's sequence id for the go-away's LastSeq.
func (c *conn) noteSeq(seq uint64) {
	c.ext.spoke.Store(true)
	for {
		old := c.ext.lastSeq.Load()
		if seq <= old || c.ext.lastSeq.CompareAndSwap(old, seq) {
			return
		}
	}
}

// cancellable reports whether the client may cancel calls (it announced
// the capability); revision 1 clients never do, and their calls pay
// nothing for it.
func (c *conn) cancellable() bool { return c.ext.peerCaps.Load()&protocol.CapCancel != 0 }

// track makes lc (zero, not yet shared) a context derived from parent that
// a cancel frame for seq ends; the call must end with untrack(seq, lc). lc
// is a field of the call's callCtx, so tracking allocates nothing per call.
func (c *conn) track(lc *lazyCancelCtx, parent context.Context, seq uint64) {
	lc.Context = parent
	c.ext.mu.Lock()
	if c.ext.running == nil {
		c.ext.running = make(map[uint64]*lazyCancelCtx)
	}
	c.ext.running[seq] = lc
	c.ext.mu.Unlock()
}

// untrack ends a tracked call.
func (c *conn) untrack(seq uint64, lc *lazyCancelCtx) {
	c.ext.mu.Lock()
	delete(c.ext.running, seq)
	c.ext.mu.Unlock()
	lc.release()
}

// lazyCancelCtx is a call's context that a cancel frame can end. It lives
// inside the call's callCtx, so it costs no allocation of its own; the
// cancellable child of the parent (a context.WithCancel, registered with
// the parent; or, when the parent is a call deadline whose timer context
// is not made yet, one context.WithDeadline on the connection's context in
// place of both) is made only when the handler first asks for Done or
// Value, so handlers that never wait on their context pay nothing more.
// Safe for concurrent use.
type lazyCancelCtx struct {
	context.Context // the parent: the connection's or the deadline's context

	mu        sync.Mutex
	child     context.Context
	stop      context.CancelFunc
	cancelled bool
}

// materialize returns the cancellable child, creating it on first use.
func (l *lazyCancelCtx) materialize() context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.child == nil {
		if dl, ok := l.Context.(*lazyDeadlineCtx); ok && dl.unmade() {
			// One timer context on the connection's context does for
			// both: it ends at the deadline, on a cancel frame (stop) and
			// with the connection, where a cancellable child of the
			// deadline's own timer context would take a second context,
			// channel and registration.
			l.child, l.stop = context.WithDeadline(dl.Context, dl.deadline)
		} else {
			l.child, l.stop = context.WithCancel(l.Context)
		}
		if l.cancelled {
			l.stop()
		}
	}
	return l.child
}

// Done returns the child's channel: closed when the parent ends or a
// cancel frame arrives.
func (l *lazyCancelCtx) Done() <-chan struct{} { return l.materialize().Done() }

// Err reports context.Canceled after a cancel frame, else the parent's
// error.
func (l *lazyCancelCtx) Err() error {
	l.mu.Lock()
	child, cancelled := l.child, l.cancelled
	l.mu.Unlock()
	if child != nil {
		return child.Err()
	}
	if cancelled {
		return context.Canceled
	}
	return l.Context.Err()
}

// Value answers from the child once it exists, so that contexts derived
// from this one (which call Done first) attach to the child's
// cancellation directly (the context package finds it through Value)
// instead of starting a goroutine; before that, from the parent.
func (l *lazyCancelCtx) Value(key any) any {
	l.mu.Lock()
	child := l.child
	l.mu.Unlock()
	if child != nil {
		return child.Value(key)
	}
	return l.Context.Value(key)
}

// cancel is a cancel frame's effect.
func (l *lazyCancelCtx) cancel() {
	l.mu.Lock()
	l.cancelled = true
	stop := l.stop
	l.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// release frees the child's registration with its parent once the call
// is over.
func (l *lazyCancelCtx) release() {
	l.mu.Lock()
	stop := l.stop
	l.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// cancelSeq ends the context of the call or stream seq; an unknown or
// finished seq is ignored (a cancel may cross the response on the wire).
func (c *conn) cancelSeq(seq uint64) {
	c.ext.mu.Lock()
	lc := c.ext.running[seq]
	st := c.ext.streams[seq]
	if ch := c.ext.waiting[seq]; ch != nil {
		delete(c.ext.waiting, seq)
		close(ch)
	}
	c.ext.mu.Unlock()
	if lc != nil {
		lc.cancel()
	}
	if st != nil {
		st.reset(fleet.NewError(fleet.Canceled, "stream cancelled by the client"))
	}
}

// goAwayFrame builds a go-away with a reason, the last sequence id read
// and a message.
func (c *conn) goAwayFrame(reason byte, msg string) []byte {
	p := protocol.AppendGoAway(make([]byte, 0, 16+len(msg)), &protocol.GoAway{Reason: reason, LastSeq: c.ext.lastSeq.Load(), Message: msg})
	return protocol.AppendControl(make([]byte, 0, protocol.HeaderSize+3+len(p)), protocol.TypeGoAway, 0, 0, p)
}

// readFailed tells the client why the server stops reading its
// connection, when it can: a protocol error or the idle timeout. A closed
// or reset connection gets nothing (nobody is there to read it).
func (c *conn) readFailed(err error) {
	if fleet.CodeOf(err) != fleet.Unknown {
		c.protocolError(err)
		return
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() && c.ext.spoke.Load() {
		if c.w.Write(c.goAwayFrame(protocol.GoAwayIdle, fmt.Sprintf("no frame for %v", c.s.opts.idleTimeout))) == nil {
			c.w.CloseAndFlush(errClosed, time.Second)
		}
	}
}

// protocolError tells the client why its connection is being closed (a
// go-away with reason protocol error and the error's text) and flushes it
// (for at most a second) before the caller closes the connection. A peer
// that never sent a valid frame (an HTTP request, random bytes) does not
// speak Fleet and gets nothing.
func (c *conn) protocolError(err error) {
	if !c.ext.spoke.Load() {
		return
	}
	if c.w.Write(c.goAwayFrame(protocol.GoAwayProtocolError, err.Error())) == nil {
		c.w.CloseAndFlush(errClosed, time.Second)
	}
}
