package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/compress"
	"github.com/fleetrpc/fleet/internal/bufpool"
	"github.com/fleetrpc/fleet/internal/ctxkey"
	"github.com/fleetrpc/fleet/internal/flow"
	"github.com/fleetrpc/fleet/internal/streamrecv"
	"github.com/fleetrpc/fleet/protocol"
)

// streamHandler is a registered streaming method: run is the typed
// handler behind an untyped stream, chain runs it inside the server's
// interceptors (built by handleStream).
type streamHandler struct {
	run   func(ctx context.Context, st Stream) error
	chain StreamFunc
	// kind and the message types describe the method (StreamMethod); a
	// type is nil when registration could not learn it.
	kind     streamKind
	req, res reflect.Type
}

func streamKey(service, method string) string { return service + "\x00" + method }

// handleStream registers a streaming method.
func (s *Server) handleStream(service, method string, h *streamHandler) error {
	if service == "" || method == "" {
		return errors.New("server: empty service or method name")
	}
	h.chain = s.streamChain(h)
	if _, dup := s.streamHandlers.LoadOrStore(streamKey(service, method), h); dup {
		return fmt.Errorf("server: stream %s.%s already registered", service, method)
	}
	return nil
}

// serverStream is the untyped server side of one stream.
type serverStream struct {
	srv     *Server
	c       *conn // nil for a stream opened in process (local set)
	local   *StreamCall
	id      uint64
	codec   codec.Codec
	codecID byte
	slot    *methodCounter // the method's concurrency slot; nil: none
	kind    streamKind     // the handler's, set when it starts
	comp    compress.ID    // the client's compressor, named in the open frame; used for messages of compressMin bytes or more
	ctx     context.Context
	cancel  context.CancelFunc
	inbox   *flow.Inbox
	credit  *flow.Credit
	info    fleet.CallInfo
	trailer fleet.Metadata
	// headerSent: the response metadata went to StreamCall.SendHeader.
	headerSent bool

	failed    atomic.Pointer[error] // why the stream was reset by the server (bad input)
	peerReset atomic.Bool           // the client cancelled: send no end
}

// streamCtx is a stream handler's context: its parent plus the stream's
// call info.
type streamCtx struct {
	context.Context
	info *fleet.CallInfo
}

// Value gives handlers the stream's info through fleet.CallInfoFrom.
func (c *streamCtx) Value(key any) any {
	if key == (ctxkey.CallInfo{}) {
		return c.info
	}
	return c.Context.Value(key)
}

// onStreamFrame handles stream open, data and window update frames.
// Frames for a stream the server does not know (already ended, reset) are
// ignored: they may have crossed the stream's end on the wire.
// A malformed connection window update (stream id 0) is returned: the
// read loop then ends the connection with a protocol-error go-away.
func (c *conn) onStreamFrame(f protocol.Frame, buf *[]byte) error {
	if f.Type == protocol.TypeStreamOpen {
		c.openStream(f, buf)
		return nil
	}
	if cw := c.ext.connWin; cw != nil {
		// Connection flow control counts every data frame, also those
		// of streams the server no longer knows: the client took them
		// from its connection credit.
		switch {
		case f.Type == protocol.TypeStreamData:
			if grant := cw.Receive(int64(len(f.Payload))); grant > 0 {
				c.grant(0, grant)
			}
		case f.Type == protocol.TypeWindowUpdate && f.Seq == 0:
			inc, err := protocol.ParseWindowUpdate(f.Payload)
			bufpool.Put(buf)
			if err != nil {
				return fleet.Errorf(fleet.InvalidArgument, "connection window update: %v", err)
			}
			c.ext.connCredit.Load().Add(int64(inc))
			return nil
		}
	}
	c.ext.mu.Lock()
	st := c.ext.streams[f.Seq]
	c.ext.mu.Unlock()
	if st == nil {
		bufpool.Put(buf)
		return nil
	}
	switch f.Type {
	case protocol.TypeStreamData:
		if f.Flags&protocol.FlagEndStream != 0 {
			bufpool.Put(buf)
			st.inbox.Close(io.EOF)
			return nil
		}
		// A queued message is charged to the memory budgets until the
		// handler takes it (Recv) or the stream drops it (Abort): many
		// streams' large messages cannot hold more than the
		// connection's budget. One that does not fit now fails its
		// stream, as the read loop cannot wait for handlers here.
		cost := int64(cap(*buf))
		if !c.tryRoom(cost) {
			bufpool.Put(buf)
			st.fail(fleet.Errorf(fleet.ResourceExhausted, "stream message of %d bytes does not fit in the connection's memory budget of %d bytes", len(f.Payload), c.s.opts.maxHeldBytes))
			return nil
		}
		c.held.Add(cost)
		m := flow.Msg{Frame: f, Buf: buf}
		if err := st.inbox.Push(m); err != nil {
			c.releaseStreamMsg(m)
			st.fail(err)
		}
	case protocol.TypeWindowUpdate:
		inc, err := protocol.ParseWindowUpdate(f.Payload)
		bufpool.Put(buf)
		if err != nil {
			st.fail(err)
			return nil
		}
		st.credit.Add(int64(inc))
	default:
		bufpool.Put(buf)
	}
	return nil
}

// openStream runs a stream open through the pipeline's admission
// (pipeline.go): auth, shutdown, the rate limits and the method's cap
// (admitLimits; the slot is held until the stream ends), the adaptive
// limit (admitStreamAdaptive: while it is reached new streams are shed; a
// stream holds no slot of it), the lookup of the method and its codec,
// the per-connection stream cap; then it starts the handler, or ends the
// stream at once with the refusal.
func (c *conn) openStream(f protocol.Frame, buf *[]byte) {
	s := c.s
	seq, cdID, timeout, compID := f.Seq, f.Codec, f.Timeout, compress.ID(f.Compression)
	svc, method := string(f.Service), string(f.Method)
	mdWire, mdN := f.MetadataSection()
	c.noteSeq(seq)
	so := s.opts.stream.withDefaults()
	st := &serverStream{
		srv: s, c: c, id: seq, codecID: cdID, comp: compID,
		inbox:  flow.NewInbox(int64(so.window), int64(so.maxMessage)),
		credit: flow.NewCredit(int64(c.ext.peerWindow.Load())),
		info:   fleet.CallInfo{Service: svc, Method: method, RemoteAddr: c.remote, LocalAddr: c.local, Route: fleet.RouteNative},
	}
	st.inbox.Release = c.releaseStreamMsg
	st.info.SetWireMetadata(mdWire, mdN)
	var hv any
	var refuseMD fleet.Metadata // the retry-after of a limit's refusal
	refuse := s.authorize(&streamCtx{Context: c.ctx, info: &st.info}, &st.info)
	if refuse == nil && s.opts.auth != nil {
		c.authed.Store(true)
	}
	if refuse == nil && s.shutdown.Load() {
		refuse = errShuttingDown
	}
	if refuse == nil {
		st.slot, refuseMD, refuse = s.admitLimits(f.Service, f.Method, false, c.ctx)
	}
	if refuse == nil {
		refuseMD, refuse = s.admitStreamAdaptive()
	}
	if refuse == nil {
		if hv, _ = s.streamHandlers.Load(streamKey(svc, method)); hv == nil {
			refuse = fleet.Errorf(fleet.NotFound, "unknown stream method %s.%s", svc, method)
		} else if st.codec = codec.Get(codec.ID(cdID)); st.codec == nil {
			refuse = fleet.Errorf(fleet.InvalidArgument, "unknown codec %d", cdID)
		}
	}
	if refuse != nil {
		s.noteRefused(f.Service, f.Method, refuse)
	}
	bufpool.Put(buf)
	parent := c.ctx
	var cancelTimeout context.CancelFunc = func() {}
	if timeout > 0 {
		parent, cancelTimeout = context.WithTimeout(parent, time.Duration(timeout)*time.Millisecond)
	}
	var cancel context.CancelFunc
	st.ctx, cancel = context.WithCancel(&streamCtx{Context: parent, info: &st.info})
	st.cancel = func() { cancel(); cancelTimeout() }
	c.ext.mu.Lock()
	if refuse == nil {
		if c.ext.streams[seq] != nil {
			refuse = fleet.Errorf(fleet.InvalidArgument, "stream %d is already open", seq)
		} else if len(c.ext.streams) >= so.maxStreams {
			refuse = fleet.Errorf(fleet.ResourceExhausted, "more than %d concurrent streams on one connection", so.maxStreams)
		} else {
			if c.ext.streams == nil {
				c.ext.streams = make(map[uint64]*serverStream)
			}
			c.ext.streams[seq] = st
		}
	}
	c.ext.mu.Unlock()
	if refuse != nil {
		st.slot.leave()
		st.cancel()
		c.endStream(seq, refuse, refuseMD)
		return
	}
	s.inflight.Add(1)
	go st.run(hv.(*streamHandler))
}

// run runs the handler and ends the stream with its outcome.
func (st *serverStream) run(h *streamHandler) {
	c := st.c
	s := c.s
	defer func() {
		c.ext.mu.Lock()
		delete(c.ext.streams, st.id)
		c.ext.mu.Unlock()
		st.cancel()
		st.inbox.Abort(errStreamEnded)
		st.slot.leave()
		s.inflight.Add(-1)
		select {
		case c.drained <- struct{}{}:
		default:
		}
	}()
	err := st.serve(h)
	if !st.peerReset.Load() {
		c.endStream(st.id, err, st.trailer)
	}
}

// serve runs the interceptors and the handler of an admitted stream, and
// returns the error the stream ends with; st.trailer then holds the
// trailers (with the handler's response metadata merged in).
func (st *serverStream) serve(h *streamHandler) error {
	err := st.intercepted(h)
	if p := st.failed.Load(); p != nil {
		err = *p
	} else if err != nil && st.ctx.Err() != nil && fleet.CodeOf(err) == fleet.Unknown {
		err = fleet.FromContextError(st.ctx.Err())
	}
	// A front end with stream headers gets them now if no message
	// went out (an error it cannot deliver: the stream is ending).
	if st.local != nil && st.local.SendHeader != nil && !st.headerSent {
		_ = st.sendHeader()
	}
	// A trailer set through the context (fleet.SetResponseTrailer,
	// fleet.AddResponseTrailer) joins the stream's ResponseTrailer; a key
	// set both ways gets both values, the stream's first (Metadata.Add).
	for k, v := range st.info.ResponseTrailer {
		st.trailers().Add(k, v)
	}
	// Response metadata set with fleet.SetResponseMetadata travels as
	// trailers too (natively; on a front end with stream headers only the
	// keys set after the headers went out); keys set on ResponseTrailer
	// win.
	for k, v := range st.info.ResponseMetadata {
		if _, set := st.trailer[k]; !set {
			st.trailers()[k] = v
		}
	}
	return err
}

// intercepted runs the handler inside the interceptors: the chain
// handleStream built for the method (see streamChain).
func (st *serverStream) intercepted(h *streamHandler) error {
	st.kind = h.kind
	return h.chain(st.ctx, &st.info, st)
}

var errStreamEnded = fleet.NewError(fleet.Canceled, "stream ended")

// fail resets the stream because the client broke a rule on it: the
// handler's context ends and the stream ends with err.
func (st *serverStream) fail(err error) {
	if fleet.CodeOf(err) == fleet.Unknown {
		err = fleet.WrapError(fleet.InvalidArgument, err)
	}
	st.failed.CompareAndSwap(nil, &err)
	st.inbox.Abort(err)
	st.cancel()
}

// reset ends the stream because the client cancelled it; no end is sent.
func (st *serverStream) reset(err error) {
	st.peerReset.Store(true)
	st.inbox.Abort(err)
	st.cancel()
}

// ctxErr is the error of an operation stopped by the stream's end.
func (st *serverStream) ctxErr() error {
	if p := st.failed.Load(); p != nil {
		return *p
	}
	if st.peerReset.Load() {
		return fleet.NewError(fleet.Canceled, "stream cancelled by the client")
	}
	return fleet.FromContextError(st.ctx.Err())
}

// send encodes msg and writes it once the client's window allows.
func (st *serverStream) send(msg any) error {
	if st.ctx.Err() != nil {
		return st.ctxErr()
	}
	if st.local != nil {
		return st.localSend(msg)
	}
	bp := bufpool.Get(1024)
	defer bufpool.Put(bp)
	buf, span, err := protocol.AppendMessage((*bp)[:0], &protocol.Message{
		Header: protocol.Header{Type: protocol.TypeStreamData, Codec: st.codecID, Seq: st.id},
		Codec:  st.codec, Compression: st.comp, CompressMin: st.srv.opts.compressMin,
		MaxFrame: st.srv.opts.limits.MaxFrameSize,
	}, msg)
	*bp = buf
	if err != nil {
		return err
	}
	n := int64(len(buf) - span.Payload)
	if !st.credit.Acquire(n, st.ctx.Done()) {
		return st.ctxErr()
	}
	// The connection credit too (nil, granting at once, when the client
	// announced no connection window).
	if !st.c.ext.connCredit.Load().Acquire(n, st.ctx.Done()) {
		return st.ctxErr()
	}
	return st.c.w.Write(buf)
}

// Recv decodes the next message into msg, a new empty message (see
// streamrecv.UnmarshalNew); io.EOF after the client's half-close.
func (st *serverStream) Recv(msg any) error {
	if st.local != nil {
		return st.localRecv(msg)
	}
	m, grant, err := st.inbox.Next(st.ctx.Done(), st.ctxErr)
	if err != nil {
		return err
	}
	defer st.c.releaseStreamMsg(m)
	if grant > 0 {
		st.c.grant(st.id, grant)
		// Let the writer send the update now rather than when this
		// handler next blocks (as the client's Recv does).
		runtime.Gosched()
	}
	// A stream message is decompressed within the bound its compressed
	// bytes give (capped by MaxDecompressedSize), as a request is.
	room, err := st.c.decompressRoom(&m.Frame)
	if err != nil {
		return err
	}
	return st.c.decodeWith(&m.Frame, msg, room, streamrecv.UnmarshalNew)
}

// grant sends the client a window update for stream id.
func (c *conn) grant(id uint64, n int64) {
	var b [protocol.HeaderSize + 3 + 4]byte
	p := protocol.AppendWindowUpdate(nil, uint32(min(n, protocol.MaxWindow)))
	_ = c.w.WriteUrgent(protocol.AppendControl(b[:0], protocol.TypeWindowUpdate, 0, id, p))
}

// endStream sends a stream's end: status, trailers and the error message.
func (c *conn) endStream(id uint64, err error, trailer fleet.Metadata) {
	h := protocol.Header{Type: protocol.TypeStreamEnd, Seq: id}
	_ = c.w.Write(protocol.AppendStatus(nil, &h, trailer, err, c.s.opts.limits.MaxFrameSize))
}
