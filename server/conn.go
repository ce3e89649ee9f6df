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
	s       *Server
	nc      net.Conn
	r       *protocol.Reader
	w       *transport.Writer
	ctx     context.Context // cancelled when the connection ends
	cancel  context.CancelFunc
	remote  net.Addr
	local   net.Addr
	active  atomic.Int64
	closing sync.Once
	acked   chan struct{} // closed when the client answers our go-away
	ackOnce sync.Once
	held    atomic.Int64  // request bytes held by running handlers
	drained chan struct{} // signalled when held drops
}

// task is one request handed to a handler goroutine or worker.
type task struct {
	c   *conn
	m   *methodType
	f   protocol.Frame
	buf *[]byte
}

func (s *Server) serveConn(nc net.Conn) {
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
	c := &conn{s: s, nc: nc, remote: nc.RemoteAddr(), local: nc.LocalAddr(), acked: make(chan struct{}), drained: make(chan struct{}, 1)}
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
	c.readLoop()
	c.close(false)
	c.r.Close()
}

func (c *conn) readLoop() {
	s := c.s
	idle := s.opts.idleTimeout
	var deadlineSet time.Time
	for {
		for _, h := range s.hooks.preRead {
			if err := h.PreReadRequest(c.ctx); err != nil {
				return
			}
		}
		if idle > 0 {
			// Refresh the read deadline lazily: at most twice per period.
			if now := time.Now(); now.Sub(deadlineSet) > idle/2 {
				deadlineSet = now
				_ = c.nc.SetReadDeadline(now.Add(idle))
			}
		}
		// Backpressure: stop reading while handlers hold too many request
		// bytes (a oneway flood would otherwise buffer without bound).
		for c.held.Load() > s.opts.maxHeldBytes {
			select {
			case <-c.drained:
			case <-c.ctx.Done():
				return
			}
		}
		f, buf, err := c.r.ReadFrame()
		if err != nil {
			if fleet.CodeOf(err) != fleet.Unknown {
				s.opts.logger.Debug("fleet server: closing connection", "remote", c.remote, "err", err)
			}
			return
		}
		switch f.Type {
		case protocol.TypeRequest:
			c.dispatch(f, buf)
		case protocol.TypePing:
			var b [protocol.ControlFrameSize]byte
			out := protocol.AppendControl(b[:0], protocol.TypePong, f.Seq)
			bufpool.Put(buf)
			_ = c.w.Write(out)
		case protocol.TypeGoAway:
			// The client's answer to our go-away: it sends nothing more.
			bufpool.Put(buf)
			c.ackOnce.Do(func() { close(c.acked) })
		default:
			bufpool.Put(buf) // pongs and stray responses
		}
	}
}

// dispatch routes one request: refused at once (shutdown, unknown method,
// over the cap) or handed to a handler.
func (c *conn) dispatch(f protocol.Frame, buf *[]byte) {
	s := c.s
	oneway := f.Flags&protocol.FlagOneway != 0
	var refuse *fleet.Error
	var m *methodType
	if s.shutdown.Load() {
		refuse = errShuttingDown
	} else if svc := (*s.services.Load())[string(f.Service)]; svc == nil {
		refuse = unknown(f.Service, f.Method, false)
	} else if m = svc.methods[string(f.Method)]; m == nil {
		refuse = unknown(f.Service, f.Method, true)
	} else if max := s.opts.maxPerConn; max > 0 && c.active.Load() >= int64(max) {
		refuse = fleet.Errorf(fleet.ResourceExhausted, "more than %d concurrent calls on one connection", max)
	}
	if refuse != nil {
		for _, h := range s.hooks.refused {
			h.OnCallRefused(string(f.Service), string(f.Method), refuse)
		}
		seq, cd := f.Seq, f.Codec
		bufpool.Put(buf)
		if !oneway {
			c.respond(seq, cd, 0, nil, refuse, nil, nil)
		}
		return
	}
	c.active.Add(1)
	c.held.Add(int64(cap(*buf)))
	s.inflight.Add(1)
	s.calls.Add(1)
	if s.tasks != nil {
		t := task{c: c, m: m, f: f, buf: buf}
		select {
		case s.tasks <- t:
		case <-s.stopped: // the pool stopped under us: Close raced
			c.active.Add(-1)
			c.held.Add(-int64(cap(*buf)))
			s.inflight.Add(-1)
			bufpool.Put(buf)
		}
		return
	}
	s.handoff(c, m, f, buf)
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
	m    *methodType // the method the call runs, for the interceptor chain's end
}

// methodKey is the context key under which a callCtx answers its method.
type methodKey struct{}

func (c *callCtx) Value(key any) any {
	switch key.(type) {
	case ctxkey.CallInfo:
		return &c.info
	case methodKey:
		return c.m
	}
	return c.Context.Value(key)
}

func (t *task) run() {
	c, m, f := t.c, t.m, &t.f
	s := c.s
	held := int64(cap(*t.buf))
	defer func() {
		c.active.Add(-1)
		s.inflight.Add(-1)
		c.held.Add(-held)
		select {
		case c.drained <- struct{}{}:
		default:
		}
	}()
	oneway := f.Flags&protocol.FlagOneway != 0
	cctx := &callCtx{Context: c.ctx, m: m}
	cctx.info = fleet.CallInfo{
		Service: m.service, Method: m.name, Metadata: f.Metadata(),
		RemoteAddr: c.remote, LocalAddr: c.local, Oneway: oneway,
	}
	if f.Timeout > 0 {
		var cancel context.CancelFunc
		cctx.Context, cancel = context.WithTimeout(c.ctx, time.Duration(f.Timeout)*time.Millisecond)
		defer cancel()
	}
	ctx := context.Context(cctx)
	seq, cdID := f.Seq, f.Codec
	var compID compress.ID
	if f.Flags&protocol.FlagCompressed != 0 {
		compID = compress.ID(f.Compression)
	}

	args, reply := m.newArgs(), m.newReply()
	err := c.decode(f, args)
	bufpool.Put(t.buf)
	t.buf = nil

	if err == nil && s.opts.auth != nil {
		if aerr := s.opts.auth(ctx, &cctx.info, cctx.info.Metadata[fleet.AuthKey]); aerr != nil {
			err = asCode(aerr, fleet.Unauthenticated)
		}
	}
	if err == nil {
		for _, h := range s.hooks.postRead {
			if err = h.PostReadRequest(ctx, &cctx.info); err != nil {
				break
			}
		}
	}
	if err == nil {
		if s.chain != nil {
			err = s.chain(ctx, args, reply)
		} else {
			err = s.safeCall(ctx, m, args, reply)
		}
	}
	for _, h := range s.hooks.preWrite {
		err = h.PreWriteResponse(ctx, &cctx.info, reply, err)
	}
	if oneway {
		return
	}
	werr := c.respond(seq, cdID, compID, reply, err, cctx.info.ResponseMetadata, &m.replyHint)
	for _, h := range s.hooks.postWrite {
		h.PostWriteResponse(ctx, &cctx.info, werr)
	}
}

// decode decompresses and unmarshals a request's payload into args.
func (c *conn) decode(f *protocol.Frame, args any) error {
	cd := codec.Get(codec.ID(f.Codec))
	if cd == nil {
		return fleet.Errorf(fleet.InvalidArgument, "unknown codec %d", f.Codec)
	}
	payload, bp, err := protocol.DecompressPayload(f, c.s.opts.limits.MaxDecompressedSize)
	if err != nil {
		return fleet.Errorf(fleet.CodeOf(err), "request: %w", err)
	}
	defer bufpool.Put(bp)
	if err := cd.Unmarshal(payload, args); err != nil {
		return fleet.Errorf(fleet.InvalidArgument, "decode arguments: %v", err)
	}
	return nil
}

// buildChain composes the interceptors around runHandler, once, when the
// server is made; nil when there are none. Each link finds the call's info
// in its context, so running the chain allocates nothing per call.
func buildChain(ics []Interceptor, final Handler) Handler {
	if len(ics) == 0 {
		return nil
	}
	h := final
	for i := len(ics) - 1; i >= 0; i-- {
		ic, next := ics[i], h
		h = func(ctx context.Context, args, reply any) error {
			return ic(ctx, fleet.CallInfoFrom(ctx), args, reply, next)
		}
	}
	return h
}

// runHandler is the end of the interceptor chain: it runs the handler of
// the call ctx belongs to.
func (s *Server) runHandler(ctx context.Context, args, reply any) error {
	m, _ := ctx.Value(methodKey{}).(*methodType)
	if m == nil {
		return fleet.NewError(fleet.Internal, "interceptor passed on a context not derived from the call's")
	}
	return s.safeCall(ctx, m, args, reply)
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
func (c *conn) respond(seq uint64, cdID byte, compID compress.ID, reply any, err error, md fleet.Metadata, hint *atomic.Int64) error {
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
	var start int
	if err == nil {
		buf, start = protocol.BeginFrame(buf[:0], &h, "", "", md)
		p0 := len(buf)
		cd := codec.Get(codec.ID(cdID))
		var merr error
		buf, merr = codec.MarshalAppend(cd, buf, reply)
		if merr != nil {
			err = fleet.Errorf(fleet.Internal, "encode reply: %v", merr)
		} else if compID != compress.None && len(buf)-p0 >= c.s.opts.compressMin {
			// The request arrived compressed with compID, so it is
			// registered; a compressor error leaves the reply uncompressed.
			buf, _ = protocol.CompressPayload(buf, start, p0, compID)
		}
		if err == nil {
			if ferr := protocol.EndFrame(buf, start, c.s.opts.limits.MaxFrameSize); ferr != nil {
				err = fleet.Errorf(fleet.ResourceExhausted, "reply too large: %v", ferr)
			}
		}
	}
	if err != nil {
		msg := err.Error()
		if fe, ok := err.(*fleet.Error); ok {
			msg = fe.Message()
		}
		h.Status = byte(fleet.CodeOf(err))
		if h.Status == byte(fleet.OK) {
			h.Status = byte(fleet.Unknown)
		}
		if len(msg) > 64<<10 {
			msg = msg[:64<<10]
		}
		buf, start = protocol.BeginFrame(buf[:0], &h, "", "", md)
		buf = append(buf, msg...)
		if ferr := protocol.EndFrame(buf, start, c.s.opts.limits.MaxFrameSize); ferr != nil {
			buf, _ = protocol.AppendFrame(buf[:0], &h, "", "", nil, []byte("error response too large"), 0)
		}
	}
	return c.w.Write(buf)
}

// goAway tells the client to send no new calls on this connection.
func (c *conn) goAway() {
	var b [protocol.ControlFrameSize]byte
	out := protocol.AppendControl(b[:0], protocol.TypeGoAway, 0)
	_ = c.w.Write(out)
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
