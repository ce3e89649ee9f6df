package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/internal/bufpool"
	"github.com/fleetrpc/fleet/internal/flow"
	"github.com/fleetrpc/fleet/internal/streamrecv"
	"github.com/fleetrpc/fleet/protocol"
)

// DefaultStreamWindow is the flow-control window a client grants each
// stream by default, in bytes of message payload.
const DefaultStreamWindow = 256 << 10

// WithStreamWindow sets the flow-control window the client grants each
// stream: how many bytes of messages the server may send on a stream
// before the caller receives them. A consumer that stops receiving holds
// back that stream's producer and nothing else. Default 256 KiB; at most
// 2^31-1.
func WithStreamWindow(n int) Option {
	return optionFunc(func(o *options) { o.streamWin = n })
}

func (o *options) streamWindow() int {
	if o.streamWin <= 0 {
		return DefaultStreamWindow
	}
	return min(o.streamWin, protocol.MaxWindow)
}

// DefaultConnWindow is the connection-wide flow-control window a client
// grants by default, in bytes of stream message payload (see
// WithConnWindow).
const DefaultConnWindow = 4 << 20

// WithConnWindow sets the connection-wide flow-control window the client
// grants the server: how many bytes of stream messages, over all streams
// of the connection, the server may send before the client's read loop
// has accepted them (the client grants them back on receipt, not when
// the caller consumes them; each stream's own window bounds what it
// buffers). It is announced in the client's Hello (setting 4) and used,
// in both directions, only when the server announces one too. Default
// 4 MiB; at most 2^31-1; a negative n announces none, so the connection
// has no connection window (as with servers before it).
func WithConnWindow(n int) Option {
	return optionFunc(func(o *options) { o.connWin = n })
}

// connWindow returns the connection window to announce, 0 for none.
func (o *options) connWindow() int {
	switch {
	case o.connWin < 0:
		return 0
	case o.connWin == 0:
		return DefaultConnWindow
	}
	return min(o.connWin, protocol.MaxWindow)
}

// ErrStreamsUnsupported is wrapped by the error of a stream opened to a
// server that does not announce streams (a revision 1 server); the stream
// was not opened. Its code is Unimplemented.
var ErrStreamsUnsupported = errors.New("server does not support streams")

// clientStream is the untyped client side of one stream.
type clientStream struct {
	c       *Client
	id      uint64
	codec   codec.Codec
	codecID byte
	ctx     context.Context
	cancel  context.CancelCauseFunc
	stop    func() bool
	inbox   *flow.Inbox
	credit  *flow.Credit
	ended   atomic.Bool // the server's end arrived
	sendMu  sync.Mutex
	closed  bool // half-closed by us; guarded by sendMu
	trailer fleet.Metadata
}

// openStream opens a stream through the interceptors' stream chain. It
// returns the stream the chain's end opened, for what the typed streams
// read beside the messages (trailer, buffered bytes), and the Stream the
// chain returned, through which they send, receive and close.
func (c *Client) openStream(ctx context.Context, service, method string, cdID codec.ID) (*clientStream, Stream, error) {
	if c.openChain == nil {
		st, err := c.openStreamNow(ctx, service, method, cdID)
		if err != nil {
			return nil, nil, err
		}
		return st, st, nil
	}
	spec := &StreamSpec{Service: service, Method: method, cd: cdID}
	sio, err := c.openChain(ctx, spec)
	if err != nil {
		if spec.opened != nil {
			spec.opened.close()
		}
		return nil, nil, err
	}
	if spec.opened == nil || sio == nil {
		if spec.opened != nil {
			spec.opened.close()
		}
		return nil, nil, fleet.NewError(fleet.Internal, "stream interceptor returned without opening the stream")
	}
	return spec.opened, sio, nil
}

// openStreamNow opens a stream to service.method: it waits for the
// server's Hello (bounded by ctx), then sends the open frame with ctx's
// deadline and outgoing metadata.
func (c *Client) openStreamNow(ctx context.Context, service, method string, cdID codec.ID) (*clientStream, error) {
	select {
	case <-c.ext.helloDone:
	case <-ctx.Done():
		return nil, notSent(fleet.FromContextError(ctx.Err()))
	}
	if c.ext.caps.Load()&protocol.CapStreams == 0 {
		if err := c.Err(); err != nil {
			return nil, notSent(err)
		}
		return nil, fleet.WrapError(fleet.Unimplemented, fmt.Errorf("open stream %s.%s: %w: %w", service, method, ErrStreamsUnsupported, ErrNotSent))
	}
	cd := codec.Get(cdID)
	if cd == nil {
		return nil, fleet.Errorf(fleet.InvalidArgument, "codec %d is not registered: %w", cdID, ErrNotSent)
	}
	// The open frame names the client's compressor (without the
	// compressed flag: it has no payload); the server compresses its
	// messages with it too.
	h := protocol.Header{Type: protocol.TypeStreamOpen, Codec: byte(cdID), Compression: byte(c.opts.comp)}
	if dl, ok := ctx.Deadline(); ok {
		d := time.Until(dl)
		if d <= 0 {
			return nil, fleet.Errorf(fleet.DeadlineExceeded, "deadline passed before the stream was opened: %w", ErrNotSent)
		}
		h.Timeout = uint32(min((d+time.Millisecond-1)/time.Millisecond, 1<<32-1))
	}
	md, kv := c.outgoing(ctx)
	win := c.ext.hello.Setting(protocol.SettingStreamWindow, DefaultStreamWindow, protocol.MaxWindow)
	st := &clientStream{
		c: c, codec: cd, codecID: byte(cdID),
		inbox:  flow.NewInbox(int64(c.opts.streamWindow()), int64(c.opts.limits.MaxFrameSize)),
		credit: flow.NewCredit(int64(win)),
	}
	st.ctx, st.cancel = context.WithCancelCause(ctx)

	c.sendMu.RLock()
	defer c.sendMu.RUnlock()
	if c.draining.Load() {
		st.cancel(nil)
		return nil, notSent(ErrGoingAway)
	}
	st.id = c.seq.Add(1)
	h.Seq = st.id
	frame, start := protocol.BeginFrame(nil, &h, service, method, md, kv...)
	err := protocol.EndFrame(frame, start, c.opts.limits.MaxFrameSize)
	if err != nil {
		st.cancel(nil)
		return nil, fleet.Errorf(fleet.ResourceExhausted, "stream open: %v: %w", err, ErrNotSent)
	}
	c.mu.Lock()
	if c.err != nil {
		err = c.err
	}
	c.mu.Unlock()
	if err != nil {
		st.cancel(nil)
		return nil, notSent(err)
	}
	c.ext.mu.Lock()
	if c.ext.streams == nil {
		c.ext.streams = make(map[uint64]*clientStream)
	}
	c.ext.streams[st.id] = st
	c.ext.open.Store(int32(len(c.ext.streams)))
	c.ext.mu.Unlock()
	c.wakeReader() // a serial caller's connection may be left unread
	if err := c.w.Write(frame); err != nil {
		st.forget()
		st.cancel(nil)
		return nil, notSent(err)
	}
	st.stop = context.AfterFunc(st.ctx, st.onDone)
	return st, nil
}

// forget takes the stream off the client's table.
func (st *clientStream) forget() {
	st.c.ext.mu.Lock()
	delete(st.c.ext.streams, st.id)
	st.c.ext.open.Store(int32(len(st.c.ext.streams)))
	st.c.ext.mu.Unlock()
}

// onDone runs when the stream's context ends: cancelled or past its
// deadline by the caller, closed, or the connection failed. A stream the
// server has not ended yet is cancelled on the server too.
func (st *clientStream) onDone() {
	st.forget()
	err := st.cause()
	if !st.ended.Load() {
		st.c.sendCancel(st.id)
	}
	st.inbox.Abort(err)
}

// cause is the error of an operation stopped by the stream's context.
func (st *clientStream) cause() error {
	err := context.Cause(st.ctx)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fleet.FromContextError(err)
	}
	return err
}

// onStreamFrame handles stream data, end and window update frames from
// the server. Frames for a stream the client no longer knows are ignored.
func (c *Client) onStreamFrame(f protocol.Frame, buf *[]byte) {
	if cw := c.ext.connWin; cw != nil {
		// Connection flow control counts every data frame, also those
		// of streams the client no longer knows: the server took them
		// from its connection credit.
		switch {
		case f.Type == protocol.TypeStreamData:
			if grant := cw.Receive(int64(len(f.Payload))); grant > 0 {
				c.grantConn(grant)
			}
		case f.Type == protocol.TypeWindowUpdate && f.Seq == 0:
			inc, err := protocol.ParseWindowUpdate(f.Payload)
			bufpool.Put(buf)
			if err != nil {
				c.fail(fleet.Errorf(fleet.InvalidArgument, "server broke the protocol: connection window update: %v", err))
				return
			}
			c.ext.connCredit.Add(int64(inc))
			return
		}
	}
	c.ext.mu.Lock()
	st := c.ext.streams[f.Seq]
	c.ext.mu.Unlock()
	if st == nil {
		bufpool.Put(buf)
		return
	}
	switch f.Type {
	case protocol.TypeStreamData:
		if err := st.inbox.Push(flow.Msg{Frame: f, Buf: buf}); err != nil {
			bufpool.Put(buf)
			st.cancel(err) // sends a cancel to the server
		}
	case protocol.TypeStreamEnd:
		st.ended.Store(true)
		st.forget()
		if f.MetadataLen() > 0 {
			st.trailer = f.Metadata() // published to the reader by the inbox's lock
		}
		var end error = io.EOF
		if f.Status != 0 {
			end = fleet.NewError(fleet.Code(f.Status), string(f.Payload))
		}
		bufpool.Put(buf)
		st.inbox.Close(end)
	case protocol.TypeWindowUpdate:
		inc, err := protocol.ParseWindowUpdate(f.Payload)
		bufpool.Put(buf)
		if err != nil {
			st.cancel(err)
			return
		}
		st.credit.Add(int64(inc))
	default:
		bufpool.Put(buf)
	}
}

// grantConn sends the server a connection window update (stream id 0).
func (c *Client) grantConn(n int64) {
	var b [protocol.HeaderSize + 3 + 4]byte
	p := protocol.AppendWindowUpdate(nil, uint32(n))
	_ = c.w.WriteUrgent(protocol.AppendControl(b[:0], protocol.TypeWindowUpdate, 0, 0, p))
}

// failStreams ends every open stream with err (the connection failed).
func (c *Client) failStreams(err error) {
	c.ext.mu.Lock()
	streams := make([]*clientStream, 0, len(c.ext.streams))
	for _, st := range c.ext.streams {
		streams = append(streams, st)
	}
	c.ext.mu.Unlock()
	for _, st := range streams {
		st.cancel(err)
	}
}

// send encodes msg and writes it once the server's window allows.
func (st *clientStream) send(msg any) error {
	st.sendMu.Lock()
	defer st.sendMu.Unlock()
	if st.closed {
		return fleet.NewError(fleet.FailedPrecondition, "send on a half-closed stream")
	}
	if st.ctx.Err() != nil || st.ended.Load() {
		return st.endErr()
	}
	bp := bufpool.Get(1024)
	defer bufpool.Put(bp)
	buf, span, err := protocol.AppendMessage((*bp)[:0], &protocol.Message{
		Header: protocol.Header{Type: protocol.TypeStreamData, Codec: st.codecID, Seq: st.id},
		Codec:  st.codec, Compression: st.c.opts.comp, CompressMin: st.c.opts.compressMin,
		MaxFrame: st.c.opts.limits.MaxFrameSize,
	}, msg)
	*bp = buf
	if err != nil {
		return err
	}
	n := int64(len(buf) - span.Payload)
	if !st.credit.Acquire(n, st.ctx.Done()) {
		return st.cause()
	}
	// The connection credit too (nil, granting at once, when the server
	// announced no connection window).
	if !st.c.ext.connCredit.Acquire(n, st.ctx.Done()) {
		return st.cause()
	}
	return st.c.w.Write(buf)
}

// endErr is the error of a send after the stream ended.
func (st *clientStream) endErr() error {
	if st.ctx.Err() != nil {
		return st.cause()
	}
	return fleet.NewError(fleet.FailedPrecondition, "stream already ended; Receive returns its status")
}

// closeSend half-closes the stream: the server's Receive sees io.EOF.
func (st *clientStream) closeSend() error {
	st.sendMu.Lock()
	defer st.sendMu.Unlock()
	if st.closed {
		return nil
	}
	st.closed = true
	if st.ctx.Err() != nil || st.ended.Load() {
		return nil
	}
	var b [protocol.HeaderSize + 3]byte
	return st.c.w.Write(protocol.AppendControl(b[:0], protocol.TypeStreamData, protocol.FlagEndStream, st.id, nil))
}

// Recv decodes the next message into msg, a new empty message (see
// streamrecv.UnmarshalNew). At the stream's end it returns
// io.EOF (status OK) or the status as a *fleet.Error, and releases the
// stream's resources.
func (st *clientStream) Recv(msg any) error {
	m, grant, err := st.inbox.Next(st.ctx.Done(), st.cause)
	if err != nil {
		st.finish()
		return err
	}
	defer bufpool.Put(m.Buf)
	if grant > 0 && !st.ended.Load() {
		var b [protocol.HeaderSize + 3 + 4]byte
		p := protocol.AppendWindowUpdate(nil, uint32(min(grant, protocol.MaxWindow)))
		_ = st.c.w.WriteUrgent(protocol.AppendControl(b[:0], protocol.TypeWindowUpdate, 0, st.id, p))
		// Yield so that the writer, just woken, sends the update now. A
		// consumer with a full queue keeps its P busy decoding, and the
		// writer waited in that P's run queue until the queue ran dry:
		// the producer then stalled for a round trip (docs/streams.md,
		// Performance).
		runtime.Gosched()
	}
	room, err := protocol.DecompressRoom(&m.Frame, st.c.opts.limits.MaxDecompressedSize)
	if err == nil {
		err = protocol.DecodeMessage(&m.Frame, msg, room, streamrecv.UnmarshalNew)
	}
	return err
}

// finish releases the stream once its end was received: its context is
// cancelled (no cancel frame goes out for an ended stream).
func (st *clientStream) finish() { st.cancel(nil) }

// close abandons the stream: a stream the server has not ended is
// cancelled on the server.
func (st *clientStream) close() {
	st.cancel(fleet.NewError(fleet.Canceled, "stream closed by the caller"))
}

// codecFor picks the codec of a stream's messages: the client's WithCodec,
// or the one codec.For chooses for v.
func (c *Client) codecFor(v any) codec.ID {
	if c.opts.codecSet {
		return c.opts.codec
	}
	return codec.For(v)
}

// ServerStreamForClient is the caller's side of a server-streaming call:
// it receives Res messages until the server ends the stream. Not safe for
// concurrent use.
type ServerStreamForClient[Res any] struct {
	st *clientStream
	io Stream // st, or what the interceptors wrapped around it
	rx streamrecv.Receiver[Res]
}

// CallServerStream opens the server-streaming method service.method on c
// and sends req. ctx bounds the whole stream: its deadline goes to the
// server, and its end cancels the stream on both sides. The stream waits
// for the server's Hello (one round trip after Dial); against a server
// without streams it fails with Unimplemented wrapping
// ErrStreamsUnsupported. Call Close when done with the stream.
func CallServerStream[Req, Res any](ctx context.Context, c *Client, service, method string, req *Req) (*ServerStreamForClient[Res], error) {
	st, sio, err := c.openStream(ctx, service, method, c.codecFor(req))
	if err != nil {
		return nil, err
	}
	s := &ServerStreamForClient[Res]{st: st, io: sio}
	err = sio.Send(req)
	if err == nil {
		err = sio.CloseRequest()
	}
	// A stream the server already ended (refused, say), or that the
	// client ended itself while sending because the server broke the
	// protocol (overran the window): Receive returns its status.
	if err != nil && !st.ended.Load() && !(st.ctx.Err() != nil && ctx.Err() == nil) {
		sio.Close()
		return nil, err
	}
	return s, nil
}

// Receive waits for the next message and reports whether there is one.
// After false, Err returns the stream's outcome: nil when the server ended
// it with OK, else its *fleet.Error.
func (s *ServerStreamForClient[Res]) Receive() bool { return s.rx.Next(recvSource{s.io}) }

// Msg returns the message of the last successful Receive.
func (s *ServerStreamForClient[Res]) Msg() *Res { return s.rx.Msg() }

// Err returns why Receive returned false: nil for a stream the server
// ended with OK.
func (s *ServerStreamForClient[Res]) Err() error { return s.rx.Err() }

// ResponseTrailer returns the trailing metadata of the server's end, once
// Receive returned false (nil before).
func (s *ServerStreamForClient[Res]) ResponseTrailer() fleet.Metadata {
	return s.st.trailerAfter(s.rx.Ended())
}

// Buffered returns the bytes of messages received and not yet consumed;
// flow control keeps it at most the stream window (or one message larger
// than the window).
func (s *ServerStreamForClient[Res]) Buffered() int64 { return s.st.inbox.Held() }

// Close abandons the stream (cancelling it on the server if it is still
// running) and releases it. It returns nil; calling it again is harmless.
func (s *ServerStreamForClient[Res]) Close() error { return s.io.Close() }

func (st *clientStream) trailerAfter(err error) fleet.Metadata {
	if err == nil || !st.ended.Load() {
		return nil
	}
	return st.trailer
}

// ClientStreamForClient is the caller's side of a client-streaming call:
// it sends Req messages, then CloseAndReceive half-closes and waits for
// the one Res. Not safe for concurrent use.
type ClientStreamForClient[Req, Res any] struct {
	st  *clientStream
	io  Stream // st, or what the interceptors wrapped around it
	err error
}

// CallClientStream opens the client-streaming method service.method on
// c. ctx behaves as for CallServerStream. The codec is chosen for a Req.
func CallClientStream[Req, Res any](ctx context.Context, c *Client, service, method string) (*ClientStreamForClient[Req, Res], error) {
	st, sio, err := c.openStream(ctx, service, method, c.codecFor(new(Req)))
	if err != nil {
		return nil, err
	}
	return &ClientStreamForClient[Req, Res]{st: st, io: sio}, nil
}

// Send sends one message, waiting while the server's window is exhausted.
// After the stream ended it returns an error; CloseAndReceive then gives
// the server's status.
func (s *ClientStreamForClient[Req, Res]) Send(msg *Req) error { return s.io.Send(msg) }

// CloseAndReceive half-closes the stream and waits for the server's
// response and end. It returns the response, or the stream's error.
func (s *ClientStreamForClient[Req, Res]) CloseAndReceive() (*Res, error) {
	defer s.io.Close()
	if err := s.io.CloseRequest(); err != nil {
		return nil, err
	}
	res := new(Res)
	if err := s.io.Receive(res); err != nil {
		if err == io.EOF {
			err = fleet.NewError(fleet.Internal, "client stream ended without a response")
		}
		return nil, err
	}
	if err := s.io.Receive(new(Res)); err != io.EOF {
		if err == nil {
			err = fleet.NewError(fleet.Internal, "client stream answered with more than one response")
		}
		return nil, err
	}
	s.err = io.EOF
	return res, nil
}

// ResponseTrailer returns the trailing metadata of the server's end, once
// CloseAndReceive returned.
func (s *ClientStreamForClient[Req, Res]) ResponseTrailer() fleet.Metadata {
	return s.st.trailerAfter(io.EOF)
}

// BidiStreamForClient is the caller's side of a bidirectional call. Send
// and CloseRequest may run on one goroutine while Receive runs on
// another.
type BidiStreamForClient[Req, Res any] struct {
	st   *clientStream
	io   Stream // st, or what the interceptors wrapped around it
	done atomic.Bool
}

// CallBidiStream opens the bidirectional method service.method on c. ctx
// behaves as for CallServerStream. Call Close (or Receive until it
// fails) when done.
func CallBidiStream[Req, Res any](ctx context.Context, c *Client, service, method string) (*BidiStreamForClient[Req, Res], error) {
	st, sio, err := c.openStream(ctx, service, method, c.codecFor(new(Req)))
	if err != nil {
		return nil, err
	}
	return &BidiStreamForClient[Req, Res]{st: st, io: sio}, nil
}

// Send sends one message, waiting while the server's window is exhausted.
func (s *BidiStreamForClient[Req, Res]) Send(msg *Req) error { return s.io.Send(msg) }

// CloseRequest half-closes the sending side: the handler's Receive
// returns io.EOF. Receiving goes on.
func (s *BidiStreamForClient[Req, Res]) CloseRequest() error { return s.io.CloseRequest() }

// Receive returns the next message; at the end, io.EOF when the server
// ended the stream with OK, else its *fleet.Error.
func (s *BidiStreamForClient[Req, Res]) Receive() (*Res, error) {
	m := new(Res)
	if err := s.io.Receive(m); err != nil {
		s.done.Store(true)
		return nil, err
	}
	return m, nil
}

// ResponseTrailer returns the trailing metadata of the server's end, once
// Receive returned an error.
func (s *BidiStreamForClient[Req, Res]) ResponseTrailer() fleet.Metadata {
	if !s.done.Load() {
		return nil
	}
	return s.st.trailerAfter(io.EOF)
}

// Close abandons the stream, cancelling it on the server if it is still
// running. It returns nil.
func (s *BidiStreamForClient[Req, Res]) Close() error { return s.io.Close() }
