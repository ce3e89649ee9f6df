package server

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/compress"
	"github.com/fleetrpc/fleet/internal/bufpool"
	"github.com/fleetrpc/fleet/internal/streamrecv"
	"github.com/fleetrpc/fleet/protocol"
)

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

func (t *task) run() {
	c, m, f := t.c, t.m, &t.f
	start := c.s.lat.start()
	var err error
	defer func() {
		c.releaseAdaptive(t.lim, err)
		t.slot.leave()
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
	// The adaptive limit and the method's concurrency cap cover the
	// handler's work, not the writing of its response (which waits for
	// the connection's writer): the slots and the latency sample end
	// here.
	c.releaseAdaptive(t.lim, err)
	t.lim = time.Time{}
	t.slot.leave()
	t.slot = nil
	if oneway {
		return
	}
	// A lone call writes its response itself when the writer is idle
	// (one hand-off less); other responses go to the writer goroutine,
	// which coalesces them into fewer syscalls.
	_ = c.respond(seq, cdID, compID, reply, err, nativeResponseMetadata(&cctx.info), &m.replyHint, c.lone(f))
}

// decode decompresses and unmarshals a request's payload into args, which
// newCall or newCallWithCtx has just allocated: a new, empty message, so
// it goes through streamrecv.UnmarshalNew (for protobuf, no reset of the
// target before decoding). room is the decompression limit reserved by
// decompressRoom.
func (c *conn) decode(f *protocol.Frame, args any, room int) error {
	return c.decodeWith(f, args, room, streamrecv.UnmarshalNew)
}

// decodeWith is decode with the codec's unmarshal function given
// (codec.Codec.Unmarshal, or streamrecv.UnmarshalNew for a new target).
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

// nativeResponseMetadata is the metadata section of a native response:
// the handler's response metadata, with its response trailer merged in
// (the native protocol has one section per response; a key in both gets
// the trailer's value). It allocates only when the handler set a trailer.
func nativeResponseMetadata(ci *fleet.CallInfo) fleet.Metadata {
	if len(ci.ResponseTrailer) == 0 {
		return ci.ResponseMetadata
	}
	md := make(fleet.Metadata, len(ci.ResponseMetadata)+len(ci.ResponseTrailer))
	for k, v := range ci.ResponseMetadata {
		md[k] = v
	}
	for k, v := range ci.ResponseTrailer {
		md[k] = v
	}
	return md
}
