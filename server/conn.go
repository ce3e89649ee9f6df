package server

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/compress"
	"github.com/fleetrpc/fleet/internal/bufpool"
	"github.com/fleetrpc/fleet/internal/ctxkey"
	"github.com/fleetrpc/fleet/internal/transport"
	"github.com/fleetrpc/fleet/protocol"
)

// conn is one served connection: a read loop on the serving goroutine,
// handlers on their own goroutines, and a coalescing writer.
type conn struct {
	s        *Server
	nc       net.Conn
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
	ext        connExt // revision 2: capabilities, cancel, streams (evolution.go)
}

// task is one request handed to a handler goroutine or worker.
type task struct {
	c    *conn
	m    *methodType
	f    protocol.Frame
	buf  *[]byte
	cost int64     // bytes counted against the budgets until the handler returns
	room int       // decompression limit reserved within cost
	cctx *callCtx  // built by the auth check; nil without auth
	lim  time.Time // admission under the adaptive limit; zero without one
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
	c.r = protocol.NewReader(nc, s.opts.readBuf, s.opts.limits)
	c.w = transport.NewWriter(nc, s.opts.writeTimeout, 0)
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
// (pipeline.go): the auth check first, then shutdown, the per-connection
// cap, the rate limits and the adaptive limit; the method is looked up
// when the call starts (start). A refused call is answered at once.
//
// It runs on the read loop and reports false when the read loop is no
// longer this goroutine's (runInline).
func (c *conn) dispatch(f protocol.Frame, buf *[]byte) (reader bool) {
	s := c.s
	c.noteSeq(f.Seq)
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
	if max := s.opts.maxPerConn; max > 0 && c.active.Load() >= int64(max) {
		if !oneway {
			refuse(fleet.Errorf(fleet.ResourceExhausted, "more than %d concurrent calls on one connection", max))
			return true
		}
		// A oneway send cannot be refused visibly: wait for a slot
		// (the connection is not read meanwhile).
		if !c.waitSlot(int64(max)) {
			refuse(errClosed)
			return true
		}
	}
	if md, rerr := s.admitRate(f.Service, f.Method, oneway, c.ctx); rerr != nil {
		refuseMD = md
		refuse(rerr)
		return true
	}
	held, w, wait, md, lerr := c.admitAdaptive(oneway)
	if lerr != nil {
		refuseMD = md
		refuse(lerr)
		return true
	}
	if w != nil {
		c.queue(f, buf, cctx, w, wait)
		return true
	}
	return c.start(f, buf, cctx, oneway, held, true)
}

// queue waits, on a goroutine of its own (never the read loop), for the
// adaptive-limit slot of a call in the limit's backlog, then starts the
// call or refuses it. The wait counts as in flight for Shutdown.
func (c *conn) queue(f protocol.Frame, buf *[]byte, cctx *callCtx, w *admitWaiter, wait time.Duration) {
	c.s.inflight.Add(1)
	cancel := c.waitCancel(f.Seq)
	go func() {
		defer c.s.inflight.Add(-1)
		held, md, err := c.awaitAdaptive(&f, w, wait, cancel)
		if err != nil {
			c.refuseCall(&f, buf, cctx, false, err, md)
			return
		}
		c.start(f, buf, cctx, false, held, false)
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

// start looks an admitted call's method up and hands the call to a
// handler goroutine, once its cost fits in the memory budgets; held: it
// holds an adaptive-limit slot. From the
// read loop (fromReader), a serial caller's call (FlagSole) that is the
// connection's only one, with no further frame read, runs on the read
// loop itself (runInline); start then reports whether the read loop is
// still this goroutine's. It reports true otherwise.
func (c *conn) start(f protocol.Frame, buf *[]byte, cctx *callCtx, oneway, held, fromReader bool) bool {
	s := c.s
	refuse := func(err error) { c.refuseCall(&f, buf, cctx, oneway, err, nil) }
	var lim time.Time
	if held {
		lim = time.Now()
	}
	m, err := s.lookup(f.Service, f.Method)
	if err != nil {
		c.dropAdaptive(lim)
		refuse(err)
		return true
	}
	cost := int64(cap(*buf))
	room, err := c.decompressRoom(&f)
	if err != nil {
		c.dropAdaptive(lim)
		refuse(err)
		return true
	}
	cost += int64(room)
	if !c.waitRoom(cost) {
		c.dropAdaptive(lim)
		refuse(errClosed)
		return true
	}
	if cctx != nil {
		cctx.info.Service, cctx.info.Method = m.service, m.name
	}
	c.active.Add(1)
	c.held.Add(cost) // and s.mem, by waitRoom
	s.inflight.Add(1)
	s.calls.Add(1)
	if s.tasks != nil {
		t := task{c: c, m: m, f: f, buf: buf, cost: cost, room: room, cctx: cctx, lim: lim}
		select {
		case s.tasks <- t:
		case <-s.stopped: // the pool stopped under us: Close raced
			c.dropAdaptive(lim)
			c.active.Add(-1)
			s.inflight.Add(-1)
			c.release(cost)
			bufpool.Put(buf)
			if cctx != nil {
				cctx.end()
			}
		}
		return true
	}
	t := task{c: c, m: m, f: f, buf: buf, cost: cost, room: room, cctx: cctx, lim: lim}
	if fromReader && c.lone(&f) && c.r.Buffered() == 0 {
		return c.runInline(t)
	}
	s.handoff(t)
	return true
}

// lone reports whether the call of request f is a serial caller's
// (protocol.FlagSole) and the connection's only running call.
func (c *conn) lone(f *protocol.Frame) bool {
	return f.Flags&protocol.FlagSole != 0 && c.active.Load() == 1
}

func (s *Server) worker() {
	for {
		select {
		case t := <-s.tasks:
			t.run()
		case <-s.stopped:
			return
		}
	}
}

// callCtx is a handler's context: the connection's (or the deadline's)
// context plus the call's info, in one allocation.
type callCtx struct {
	context.Context
	info fleet.CallInfo
	// dl is the call's deadline context when the request has a deadline
	// (hasDL); see lazyDeadlineCtx. end releases it.
	dl    lazyDeadlineCtx
	hasDL bool
	// lazy is the cancel-frame context of a tracked call (see track),
	// kept here so that the call's contexts take one allocation.
	lazy lazyCancelCtx
	// slot holds the context while reflectMethod.invoke hands it to
	// reflect.Value.Call (a Value needs an addressable variable, which
	// would otherwise be allocated per call); slotBusy guards it against
	// an interceptor running the handler twice at once.
	slot     context.Context
	slotBusy atomic.Bool
}

// freeSlot ends reflectMethod.invoke's use of slot.
func (c *callCtx) freeSlot() {
	c.slot = nil
	c.slotBusy.Store(false)
}

// callCtxKey is the context key under which a callCtx answers itself, so
// that reflectMethod.invoke finds the call's slot under the contexts
// interceptors derive from it.
type callCtxKey struct{}

// newCallCtx builds a call's context from its frame: the connection's
// context, with the frame's deadline when it has one.
func (c *conn) newCallCtx(f *protocol.Frame, service, method string) *callCtx {
	cctx, mdBuf := newCallCtxMD(f.MetadataSize())
	c.initCallCtx(cctx, f, service, method, mdBuf)
	return cctx
}

// initCallCtx makes the zero cctx a call's context, as newCallCtx does.
// The request's metadata section is copied into mdBuf when it fits
// there (mdBuf is then part of cctx's allocation and written only here),
// else into a string of its own.
func (c *conn) initCallCtx(cctx *callCtx, f *protocol.Frame, service, method string, mdBuf []byte) {
	cctx.Context = c.ctx
	cctx.info = fleet.CallInfo{
		Service: service, Method: method,
		RemoteAddr: c.remote, LocalAddr: c.local, Oneway: f.Flags&protocol.FlagOneway != 0,
		Route: fleet.RouteNative,
	}
	cctx.info.SetWireMetadata(f.MetadataSectionIn(mdBuf))
	if f.Timeout > 0 {
		cctx.dl.Context = c.ctx
		cctx.dl.deadline = time.Now().Add(time.Duration(f.Timeout) * time.Millisecond)
		cctx.Context, cctx.hasDL = &cctx.dl, true
	}
}

// end releases what the call's context holds (the deadline's timer
// context, if one was made). It runs once, when the call is over or
// refused.
func (c *callCtx) end() {
	if c.hasDL {
		c.dl.release()
	}
}

func (c *callCtx) Value(key any) any {
	switch key.(type) {
	case ctxkey.CallInfo:
		return &c.info
	case callCtxKey:
		return c
	}
	return c.Context.Value(key)
}

func (t *task) run() {
	c, m, f := t.c, t.m, &t.f
	start := c.s.lat.start()
	var err error
	defer func() {
		c.releaseAdaptive(t.lim, err)
		c.s.lat.done(start)
		c.active.Add(-1)
		c.s.inflight.Add(-1)
		c.release(t.cost)
	}()
	oneway := f.Flags&protocol.FlagOneway != 0
	// The call's context, args and reply: one allocation, unless the auth
	// check made the context already.
	cctx := t.cctx
	var args, reply any
	if cctx == nil {
		var mdBuf []byte
		cctx, args, reply, mdBuf = m.newCallWithCtx(f.MetadataSize())
		c.initCallCtx(cctx, f, m.service, m.name, mdBuf)
	} else {
		args, reply = m.newCall()
	}
	defer cctx.end()
	if !oneway && c.cancellable() {
		lc := &cctx.lazy
		c.track(lc, cctx.Context, f.Seq)
		cctx.Context = lc
		defer c.untrack(f.Seq, lc)
	}
	ctx := context.Context(cctx)
	seq, cdID := f.Seq, f.Codec
	var compID compress.ID
	if f.Flags&protocol.FlagCompressed != 0 {
		compID = compress.ID(f.Compression)
	}

	err = c.decode(f, args, t.room)
	bufpool.Put(t.buf)
	t.buf = nil

	if err == nil {
		err = m.chain(ctx, &cctx.info, args, reply)
	}
	// The adaptive limit covers the handler's work, not the writing of
	// its response (which waits for the connection's writer): the slot
	// and the latency sample end here.
	c.releaseAdaptive(t.lim, err)
	t.lim = time.Time{}
	if oneway {
		return
	}
	// A lone call writes its response itself when the writer is idle
	// (one hand-off less); other responses go to the writer goroutine,
	// which coalesces them into fewer syscalls.
	_ = c.respond(seq, cdID, compID, reply, err, cctx.info.ResponseMetadata, &m.replyHint, c.lone(f))
}

// decode decompresses and unmarshals a request's payload into args. room
// is the decompression limit reserved by decompressRoom.
func (c *conn) decode(f *protocol.Frame, args any, room int) error {
	return c.decodeWith(f, args, room, codec.Codec.Unmarshal)
}

// decodeWith is decode with the codec's unmarshal function given:
// streams pass streamrecv.UnmarshalNew, whose targets are always new.
// room was reserved by decompressRoom for this frame; a payload that
// decompresses to more fails (protocol.DecodeMessage has the codes).
func (c *conn) decodeWith(f *protocol.Frame, args any, room int, unmarshal protocol.Unmarshaler) error {
	return protocol.DecodeMessage(f, args, max(room, 1), unmarshal)
}

// safeCall runs the handler and turns a panic into an Internal error.
func (s *Server) safeCall(ctx context.Context, m *methodType, args, reply any) (err error) {
	defer func() {
		if p := recover(); p != nil {
			buf := make([]byte, 4096)
			buf = buf[:runtime.Stack(buf, false)]
			// Logged once per panic: a panic is a bug, not traffic.
			s.opts.logger.Error("fleet server: handler panic", "service", m.service, "method", m.name, "panic", fmt.Sprint(p), "stack", string(buf))
			err = fleet.Errorf(fleet.Internal, "panic in %s.%s: %v", m.service, m.name, p)
		}
	}()
	return m.invoke(ctx, args, reply)
}

// asCode returns err as a *fleet.Error, with code when err carries none.
func asCode(err error, code fleet.Code) error {
	if c := fleet.CodeOf(err); c != fleet.Unknown {
		return err
	}
	return fleet.WrapError(code, err)
}

// respond encodes and queues a response: reply on success, err otherwise.
// With now (from a handler's goroutine) the response is written on the
// calling goroutine when the connection's writer is idle
// (transport.Writer.WriteNow).
func (c *conn) respond(seq uint64, cdID byte, compID compress.ID, reply any, err error, md fleet.Metadata, hint *atomic.Int64, now bool) error {
	size := 1024
	if hint != nil {
		size = max(size, int(hint.Load()))
	}
	bp := bufpool.Get(size)
	buf := *bp
	defer func() {
		if hint != nil && int64(len(buf)) != hint.Load() {
			hint.Store(int64(len(buf)))
		}
		*bp = buf
		bufpool.Put(bp)
	}()
	h := protocol.Header{Type: protocol.TypeResponse, Codec: cdID, Seq: seq}
	if err == nil {
		// The request arrived compressed with compID, so it is registered.
		buf, _, err = protocol.AppendMessage(buf[:0], &protocol.Message{
			Header: h, Metadata: md, Codec: codec.Get(codec.ID(cdID)),
			Compression: compID, CompressMin: c.s.opts.compressMin,
			MaxFrame: c.s.opts.limits.MaxFrameSize,
		}, reply)
	}
	if err != nil {
		buf = protocol.AppendStatus(buf[:0], &h, md, err, c.s.opts.limits.MaxFrameSize)
	}
	if now {
		return c.w.WriteNow(buf)
	}
	return c.w.Write(buf)
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
