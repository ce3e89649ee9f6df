package server

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/internal/bufpool"
	"github.com/fleetrpc/fleet/internal/transport"
	"github.com/fleetrpc/fleet/protocol"
)

// conn is one served connection: a read loop on the serving goroutine,
// handlers on their own goroutines, and a coalescing writer.
type conn struct {
	s        *Server
	nc       net.Conn
	rw       net.Conn // nc for reading and writing (transport.Raw)
	r        *protocol.Reader
	w        *transport.Writer
	ctx      context.Context // cancelled when the connection ends
	cancel   context.CancelFunc
	remote   net.Addr
	local    net.Addr
	active   atomic.Int64
	closing  sync.Once
	acked    chan struct{} // closed when the client answers our go-away
	ackOnce  sync.Once
	held     atomic.Int64  // request bytes held by running handlers
	drained  chan struct{} // signalled when a handler finishes (held and active drop)
	authed   atomic.Bool   // a call or stream passed the auth check (always false without auth)
	preHello bool          // read loop only: a Hello was answered before auth
	reading  int64         // server budget reserved for the frame being read; read loop only
	readDone chan struct{} // closed when a read loop handed over (readOn) stops reading

	// Calls run on the read loop (runInline); see inline.go for the
	// layout of inline.
	inline     atomic.Uint64
	inlineRuns uint64  // read loop only
	inlineSeen uint64  // inlineMonitor only: inline at its last tick
	ext        connExt // revision 2: capabilities, cancel, streams (control.go)
}

// task is one request handed to a handler goroutine or worker.
type task struct {
	c    *conn
	m    *methodType
	f    protocol.Frame
	buf  *[]byte
	cost int64          // bytes counted against the budgets until the handler returns
	room int            // decompression limit reserved within cost
	cctx *callCtx       // built by the auth check; nil without auth
	lim  time.Time      // admission under the adaptive limit; zero without one
	slot *methodCounter // the method's concurrency slot; nil: none
}

func (s *Server) serveConn(nc net.Conn) {
	ip, ok := s.admit(nc)
	if !ok {
		return
	}
	defer s.leave(ip)
	for _, h := range s.hooks.accept {
		var ok bool
		if nc, ok = h.OnConnAccept(nc); !ok {
			nc.Close()
			return
		}
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	c := &conn{s: s, nc: nc, remote: nc.RemoteAddr(), local: nc.LocalAddr(), acked: make(chan struct{}), drained: make(chan struct{}, 1), readDone: make(chan struct{})}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.rw = transport.Raw(nc) // serial callers: reads and writes without waking sysmon
	c.r = protocol.NewReader(c.rw, s.opts.readBuf, s.opts.limits)
	c.w = transport.NewWriter(c.rw, s.opts.writeTimeout, 0)
	s.mu.Lock()
	if s.shutdown.Load() {
		s.mu.Unlock()
		nc.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	go func() {
		if err := c.w.Run(0, nil); err != nil {
			c.nc.Close() // unblocks the read loop
		}
	}()
	if stop := c.authDeadline(); stop != nil {
		defer stop()
	}
	if c.readLoop() {
		// A call run inline took too long and another goroutine reads
		// on (readOn): the connection ends when it stops.
		<-c.readDone
	}
	if c.inlineRuns > 0 {
		s.unregisterInline(c)
	}
	c.close(false)
	c.r.Close()
}

// readOn continues a read loop that runInline handed over, on a new
// goroutine; when reading ends it tells the connection's serving goroutine
// (readDone), which ends the connection.
func (c *conn) readOn() {
	if !c.readLoop() {
		close(c.readDone)
	}
}

// readLoop reads the connection's frames and acts on them until reading
// fails or the connection ends. It reports true when it handed reading
// over to another goroutine instead: a call it ran inline took too long
// (runInline).
func (c *conn) readLoop() (handedOff bool) {
	s := c.s
	idle := s.opts.idleTimeout
	var deadlineSet time.Time
	defer func() {
		if !handedOff {
			c.dropReading()
		}
	}()
	for {
		c.dropReading() // of the last frame, whatever it was
		if idle > 0 {
			// Refresh the read deadline lazily: at most twice per period.
			if now := time.Now(); now.Sub(deadlineSet) > idle/2 {
				deadlineSet = now
				_ = c.nc.SetReadDeadline(now.Add(idle))
			}
		}
		// Backpressure: stop reading while handlers hold too many request
		// bytes (a oneway flood would otherwise buffer without bound).
		if !c.waitRoom(0) {
			return
		}
		f, buf, err := c.readFrame(&deadlineSet)
		if err != nil {
			if fleet.CodeOf(err) != fleet.Unknown {
				s.opts.logger.Debug("fleet server: closing connection", "remote", c.remote, "err", err)
			}
			c.readFailed(err)
			return
		}
		switch f.Type {
		case protocol.TypeRequest:
			if !c.dispatch(f, buf) {
				return true
			}
		case protocol.TypePing:
			if s.opts.auth != nil && !c.authed.Load() {
				// Heartbeats do not keep an unauthenticated peer around.
				// The first Hello is answered: a client opens streams
				// only once the capability exchange is done, and a
				// stream carries the token its auth check needs.
				if f.Flags&protocol.FlagHello == 0 || c.preHello {
					bufpool.Put(buf)
					continue
				}
				c.preHello = true
			}
			c.onPing(f, buf)
		case protocol.TypeGoAway:
			// The client's answer to our go-away: it sends nothing more.
			bufpool.Put(buf)
			c.ackOnce.Do(func() { close(c.acked) })
		default:
			// Revision 2 frames; pongs, stray responses and unknown types
			// are ignored.
			if err := c.onExtension(f, buf); err != nil {
				s.opts.logger.Debug("fleet server: closing connection", "remote", c.remote, "err", err)
				c.readFailed(err)
				return
			}
		}
	}
}

// dispatch routes one request through the pipeline's admission
// (pipeline.go): the auth check first, then shutdown, the rate limits and
// the method's concurrency cap (admitLimits), the per-connection cap and
// the adaptive limit; the method is looked up when the call starts
// (start). A refused call is answered at once.
//
// It runs on the read loop and reports false when the read loop is no
// longer this goroutine's (runInline).
func (c *conn) dispatch(f protocol.Frame, buf *[]byte) (reader bool) {
	s := c.s
	c.noteSeq(f.Seq)
	// A serial caller's requests (FlagSole) switch the socket to raw
	// reads and writes, others back (transport.Raw says why).
	transport.SetSerial(c.rw, f.Flags&protocol.FlagSole != 0)
	oneway := f.Flags&protocol.FlagOneway != 0
	var cctx *callCtx
	var refuseMD fleet.Metadata
	refuse := func(err error) { c.refuseCall(&f, buf, cctx, oneway, err, refuseMD) }
	if s.opts.auth != nil {
		cctx = c.newCallCtx(&f, string(f.Service), string(f.Method))
		if aerr := s.authorize(cctx, &cctx.info); aerr != nil {
			refuse(aerr)
			return true
		}
		c.authed.Store(true)
	}
	if s.shutdown.Load() {
		refuse(errShuttingDown)
		return true
	}
	slot, md, rerr := s.admitLimits(f.Service, f.Method, oneway, c.ctx)
	if rerr != nil {
		refuseMD = md
		refuse(rerr)
		return true
	}
	if max := s.opts.maxPerConn; max > 0 && c.active.Load() >= int64(max) {
		if !oneway {
			slot.leave()
			s.connCapRefused.Add(1)
			refuse(fleet.Errorf(fleet.ResourceExhausted, "more than %d concurrent calls on one connection", max))
			return true
		}
		// A oneway send cannot be refused visibly: wait for a slot
		// (the connection is not read meanwhile).
		s.connCapWaiting.Add(1)
		ok := c.waitSlot(int64(max))
		s.connCapWaiting.Add(-1)
		if !ok {
			slot.leave()
			refuse(errClosed)
			return true
		}
	}
	held, w, wait, md, lerr := c.admitAdaptive(oneway)
	if lerr != nil {
		slot.leave()
		refuseMD = md
		refuse(lerr)
		return true
	}
	if w != nil {
		c.queue(f, buf, cctx, slot, w, wait)
		return true
	}
	return c.start(f, buf, cctx, slot, oneway, held, true)
}

// queue waits, on a goroutine of its own (never the read loop), for the
// adaptive-limit slot of a call in the limit's backlog, then starts the
// call or refuses it. The wait counts as in flight for Shutdown.
func (c *conn) queue(f protocol.Frame, buf *[]byte, cctx *callCtx, slot *methodCounter, w *admitWaiter, wait time.Duration) {
	c.s.inflight.Add(1)
	cancel := c.waitCancel(f.Seq)
	go func() {
		defer c.s.inflight.Add(-1)
		held, md, err := c.awaitAdaptive(&f, w, wait, cancel)
		if err != nil {
			slot.leave()
			c.refuseCall(&f, buf, cctx, false, err, md)
			return
		}
		c.start(f, buf, cctx, slot, false, held, false)
	}()
}

// refuseCall answers a call refused before it ran (none for a oneway
// send) with err and the response metadata md, after the refused hooks.
func (c *conn) refuseCall(f *protocol.Frame, buf *[]byte, cctx *callCtx, oneway bool, err error, md fleet.Metadata) {
	c.s.noteRefused(f.Service, f.Method, err)
	seq, cd := f.Seq, f.Codec
	bufpool.Put(buf)
	if cctx != nil {
		cctx.end()
	}
	if !oneway {
		c.respond(seq, cd, 0, nil, err, md, nil, false)
	}
}

// start looks an admitted call's method up and hands the call to the
// server's runner (s.run, runner.go), once its cost fits in the memory
// budgets; slot: the method's concurrency slot it holds (nil: none);
// held: it holds an adaptive-limit slot. From the read loop (fromReader)
// the runner may run the call on the read loop itself (runInline); start
// then reports whether the read loop is still this goroutine's. It
// reports true otherwise.
func (c *conn) start(f protocol.Frame, buf *[]byte, cctx *callCtx, slot *methodCounter, oneway, held, fromReader bool) bool {
	s := c.s
	var lim time.Time
	if held {
		lim = time.Now()
	}
	refuse := func(err error) bool {
		c.dropAdaptive(lim)
		slot.leave()
		c.refuseCall(&f, buf, cctx, oneway, err, nil)
		return true
	}
	m, err := s.lookup(f.Service, f.Method)
	if err != nil {
		return refuse(err)
	}
	if max := s.opts.limits.MaxDecompressedSize; f.Flags&protocol.FlagCompressed == 0 && len(f.Payload) > max {
		// The bound on a request's decoded bytes holds for a payload
		// sent uncompressed too (MaxFrameSize may be set higher).
		c.dropAdaptive(lim)
		refuse(fleet.Errorf(fleet.ResourceExhausted, "payload of %d bytes exceeds the limit of %d", len(f.Payload), max))
		return true
	}
	cost := int64(cap(*buf))
	room, err := c.decompressRoom(&f)
	if err != nil {
		return refuse(err)
	}
	cost += int64(room)
	if !c.waitRoom(cost) {
		return refuse(errClosed)
	}
	if cctx != nil {
		cctx.info.Service, cctx.info.Method = m.service, m.name
	}
	c.active.Add(1)
	c.held.Add(cost) // and s.mem, by waitRoom
	s.inflight.Add(1)
	s.calls.Add(1)
	return s.run(task{c: c, m: m, f: f, buf: buf, cost: cost, room: room, cctx: cctx, lim: lim, slot: slot}, fromReader)
}

// lone reports whether the call of request f is a serial caller's
// (protocol.FlagSole) and the connection's only running call.
func (c *conn) lone(f *protocol.Frame) bool {
	return f.Flags&protocol.FlagSole != 0 && c.active.Load() == 1
}

// goAway tells the client to send no new calls on this connection.
func (c *conn) goAway() {
	_ = c.w.Write(c.goAwayFrame(protocol.GoAwayShutdown, "server shutting down"))
}

// close ends the connection once: with flush, queued responses are
// written first (bounded by a second).
func (c *conn) close(flush bool) {
	c.closing.Do(func() {
		if flush {
			c.w.CloseAndFlush(errClosed, time.Second)
		} else {
			c.w.Fail(errClosed)
		}
		c.nc.Close()
		c.cancel()
		c.s.mu.Lock()
		delete(c.s.conns, c)
		c.s.mu.Unlock()
		for _, h := range c.s.hooks.closed {
			h.OnConnClose(c.nc)
		}
	})
}

// authToken returns the credential the request carries under
// fleet.AuthKey ("" for none), without making its metadata map.
func authToken(ci *fleet.CallInfo) string {
	v, _ := ci.MetadataValue(fleet.AuthKey)
	return v
}
