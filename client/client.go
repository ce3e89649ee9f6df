package client

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/internal/bufpool"
	"github.com/fleetrpc/fleet/internal/ctxkey"
	"github.com/fleetrpc/fleet/internal/transport"
	"github.com/fleetrpc/fleet/protocol"
)

// Errors a call can fail with besides the server's own. Each is a
// *fleet.Error with code Unavailable; test with errors.Is.
var (
	// ErrClosed: the client was closed.
	ErrClosed = fleet.NewError(fleet.Unavailable, "client closed")
	// ErrGoingAway: the server announced shutdown; the call was not sent.
	ErrGoingAway = fleet.NewError(fleet.Unavailable, "server is going away")
	// ErrNotSent is wrapped by every error for a call that was never
	// written to the connection, so the server cannot have run it.
	ErrNotSent = errors.New("request not sent")
	// ErrConnectionLost is wrapped by the error of a call that was sent
	// but whose connection broke before the response: the server may or
	// may not have run it.
	ErrConnectionLost = errors.New("connection lost")
)

// Client is one multiplexed connection to a server. Any number of
// goroutines may call through it at once; responses are matched to calls
// by sequence id in whatever order they arrive. A broken connection fails
// every pending call at once; a Client does not reconnect (XClient does).
type Client struct {
	opts       options
	nc         net.Conn
	rw         net.Conn // nc for reading and writing (transport.Raw)
	r          *protocol.Reader
	w          *transport.Writer
	invoke     Invoker    // Call and Go: the interceptors around call, built once
	invokeSend Invoker    // Send: the interceptors around sendOneway, built once
	openChain  StreamFunc // stream opens: the interceptors around openSpec, built once; nil without interceptors

	seq      atomic.Uint64
	received atomic.Uint64 // frames read, for heartbeats
	sizeHint atomic.Int64  // size of the last request frame, to size the next buffer
	draining atomic.Bool
	// sendMu is held shared by each send from its draining check until its
	// frame is queued, and exclusively by ackGoAway, so the go-away answer
	// is queued after every request that passed the check.
	sendMu sync.RWMutex

	mu      sync.Mutex
	pending map[uint64]*Call
	err     error // why the client stopped; nil while it works

	done chan struct{}
	ext  clientExt // revision 2: capabilities, go-away, streams (control.go)

	// Who reads the connection (selfread.go): rstate, under mu; resume
	// tells a parked read loop that reading is its own again.
	rstate   readerState
	selfRead bool   // callers may read: TCP or Unix socket (deadlines interrupt reads)
	rgen     uint64 // callers that read for themselves, under mu
	resume   chan struct{}
}

// Dial connects to addr over network ("tcp", "tcp4", "tcp6", "unix",
// "tls", or a network registered with package transport, such as "kcp"
// once github.com/fleetrpc/fleet/transport/kcp is imported) and returns a
// client; an unknown network fails with code InvalidArgument. ctx bounds
// connecting (and the TLS handshake); WithDialTimeout applies when ctx
// has no earlier deadline.
func Dial(ctx context.Context, network, addr string, opts ...Option) (*Client, error) {
	o := defaultOptions()
	for _, op := range opts {
		op.apply(&o)
	}
	if o.dialTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.dialTimeout)
		defer cancel()
	}
	useTLS := network == "tls" || o.tls != nil
	if network == "tls" {
		network = "tcp"
	}
	nc, err := dialNetwork(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if useTLS {
		cfg := o.tls
		if cfg == nil {
			cfg = &tls.Config{}
		}
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, fleet.Errorf(fleet.Unavailable, "tls handshake with %s: %w", addr, err)
		}
		nc = tc
	}
	return newClient(nc, o), nil
}

// NewClient runs a client over an established connection, which it owns
// from then on.
func NewClient(nc net.Conn, opts ...Option) *Client {
	o := defaultOptions()
	for _, op := range opts {
		op.apply(&o)
	}
	return newClient(nc, o)
}

func newClient(nc net.Conn, o options) *Client {
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	rw := transport.Raw(nc) // serial callers: reads and writes without waking sysmon
	c := &Client{
		opts:    o,
		nc:      nc,
		rw:      rw,
		r:       protocol.NewReader(rw, o.readBuf, o.limits),
		w:       transport.NewWriter(rw, o.writeTimeout, 0),
		pending: make(map[uint64]*Call),
		done:    make(chan struct{}),
		resume:  make(chan struct{}, 1),
	}
	switch nc.(type) {
	case *net.TCPConn, *net.UnixConn:
		c.selfRead = true
	}
	c.opts.limits = c.r.Limits().WithDefaults()
	c.invoke = chain(o.interceptors, c.call)
	c.invokeSend = chain(o.interceptors, c.sendOneway)
	c.openChain = c.streamChain(o.interceptors)
	c.startHello()
	go c.readLoop()
	go c.writeLoop()
	return c
}

// Call is one call made with Go, or used internally by Call.
type Call struct {
	Service string
	Method  string
	Args    any
	Reply   any
	// Error is the call's outcome, set before the call is sent on Done.
	Error error
	// ResponseMetadata is the metadata the server sent back, or nil.
	ResponseMetadata fleet.Metadata
	// Done receives the call when it completes.
	Done chan *Call

	seq     uint64
	sync    bool
	wake    chan struct{} // sync calls: the response or failure arrived
	resp    protocol.Frame
	respBuf *[]byte
	stop    func() bool // async calls: stops the context watcher
	mdSink  *fleet.Metadata

	// A sync call that reads its response itself (selfread.go).
	reads     bool          // the call holds the connection's reader
	client    *Client       // for interrupt
	interrupt func()        // ends the caller's read at ctx's end; made once per pooled Call
	intrDone  chan struct{} // interrupt has run
}

func (call *Call) complete() {
	if call.sync {
		call.wake <- struct{}{}
		return
	}
	if call.stop != nil {
		call.stop()
	}
	select {
	case call.Done <- call:
	default:
		// Like net/rpc: a full Done channel is the caller's bug; the call
		// is dropped rather than blocking the connection.
	}
}

var callPool = sync.Pool{New: func() any {
	call := &Call{sync: true, wake: make(chan struct{}, 1), intrDone: make(chan struct{}, 1)}
	call.interrupt = call.interruptRead
	return call
}}

// Call calls service.method with args and waits for the reply, which it
// decodes into reply (a pointer, or nil to discard it). ctx's deadline is
// sent to the server and bounds the wait: at the deadline Call returns
// DeadlineExceeded even if the server never answers; cancelling ctx
// returns Canceled at once. (Writing the request comes first: when the
// server has stopped reading the connection and the buffers between are
// full, Call waits for room, at most the write timeout; the connection's
// only call writes its request itself, other calls queue it, up to 4 MiB
// queued per connection. Over TCP and Unix sockets the connection's only
// call also reads its response off the socket itself rather than being
// woken by the connection's read loop; with a context that can end, that
// costs it two small allocations.) Request metadata comes from
// fleet.WithOutgoingMetadata; response metadata goes to
// fleet.WithResponseMetadata. Errors are *fleet.Error values: the
// server's code and message, or Unavailable for connection failures.
func (c *Client) Call(ctx context.Context, service, method string, args, reply any) error {
	return c.invoke(ctx, service, method, args, reply)
}

func (c *Client) call(ctx context.Context, service, method string, args, reply any) error {
	call := callPool.Get().(*Call)
	call.Reply = reply
	call.mdSink, _ = ctx.Value(ctxkey.ResponseSink{}).(*fleet.Metadata)
	if err := c.send(ctx, call, service, method, args, false); err != nil {
		if call.reads {
			c.releaseReader()
		}
		c.recycle(call)
		return err
	}
	if call.reads && c.readOwn(ctx, call) {
		err := c.finish(call)
		c.recycle(call)
		return err
	}
	if done := ctx.Done(); done != nil {
		select {
		case <-call.wake:
		case <-done:
			if c.remove(call.seq) {
				c.cancelIfNotExpired(ctx, call.seq)
				c.recycle(call)
				return fleet.FromContextError(ctx.Err())
			}
			<-call.wake // the response is being delivered
		}
	} else {
		<-call.wake
	}
	err := c.finish(call)
	c.recycle(call)
	return err
}

func (c *Client) recycle(call *Call) {
	*call = Call{sync: true, wake: call.wake, interrupt: call.interrupt, intrDone: call.intrDone}
	callPool.Put(call)
}

// Go starts a call and returns at once. The call is sent on done when it
// completes; done must be buffered (a nil done gets a new channel of 1).
// ctx behaves as for Call: at its deadline or cancellation the call
// completes with DeadlineExceeded or Canceled. The client's interceptors
// run around the call as for Call; with interceptors configured, each Go
// call runs them on a goroutine of its own, which ends when the call
// completes.
func (c *Client) Go(ctx context.Context, service, method string, args, reply any, done chan *Call) *Call {
	if done == nil {
		done = make(chan *Call, 1)
	} else if cap(done) == 0 {
		panic("client: Go with an unbuffered done channel")
	}
	if len(c.opts.interceptors) == 0 {
		return c.goCall(ctx, service, method, args, reply, done)
	}
	call := &Call{Service: service, Method: method, Args: args, Reply: reply, Done: done}
	sink, _ := ctx.Value(ctxkey.ResponseSink{}).(*fleet.Metadata)
	ictx := fleet.WithResponseMetadata(ctx, &call.ResponseMetadata)
	go func() {
		call.Error = c.invoke(ictx, service, method, args, reply)
		if sink != nil {
			*sink = call.ResponseMetadata
		}
		call.complete()
	}()
	return call
}

// goCall starts an asynchronous call without interceptors.
func (c *Client) goCall(ctx context.Context, service, method string, args, reply any, done chan *Call) *Call {
	call := &Call{Service: service, Method: method, Args: args, Reply: reply, Done: done}
	call.mdSink, _ = ctx.Value(ctxkey.ResponseSink{}).(*fleet.Metadata)
	if err := c.send(ctx, call, service, method, args, false); err != nil {
		call.Error = err
		call.complete()
		return call
	}
	if ctx.Done() != nil {
		// Set under mu while the call is pending: the reader takes the
		// call off the table under mu before it reads call.stop.
		seq := call.seq
		c.mu.Lock()
		if _, ok := c.pending[seq]; ok {
			call.stop = context.AfterFunc(ctx, func() {
				if c.remove(seq) {
					c.cancelIfNotExpired(ctx, seq)
					call.Error = fleet.FromContextError(ctx.Err())
					call.stop = nil
					call.complete()
				}
			})
		}
		c.mu.Unlock()
	}
	return call
}

// Send sends a oneway call: the server runs it and sends nothing back, not
// even an error. It returns once the request is queued for writing (nil),
// or the error that prevented that. The client's interceptors run around
// it with a nil reply; their invoke returns once the request is queued.
func (c *Client) Send(ctx context.Context, service, method string, args any) error {
	return c.invokeSend(ctx, service, method, args, nil)
}

// sendOneway is the end of Send's interceptor chain.
func (c *Client) sendOneway(ctx context.Context, service, method string, args, _ any) error {
	return c.send(ctx, nil, service, method, args, true)
}

// send encodes and queues a request; for two-way calls it registers call
// as pending first.
func (c *Client) send(ctx context.Context, call *Call, service, method string, args any, oneway bool) error {
	c.sendMu.RLock()
	defer c.sendMu.RUnlock()
	if c.draining.Load() {
		return notSent(ErrGoingAway)
	}
	cdID := c.opts.codec
	if !c.opts.codecSet {
		cdID = codec.For(args)
	}
	cd := codec.Get(cdID)
	if cd == nil {
		return fleet.Errorf(fleet.InvalidArgument, "codec %d is not registered: %w", cdID, ErrNotSent)
	}
	h := protocol.Header{Type: protocol.TypeRequest, Codec: byte(cdID)}
	if oneway {
		h.Flags |= protocol.FlagOneway
	}
	if dl, ok := ctx.Deadline(); ok {
		d := time.Until(dl)
		if d <= 0 {
			return fleet.Errorf(fleet.DeadlineExceeded, "deadline passed before the call was sent: %w", ErrNotSent)
		}
		ms := (d + time.Millisecond - 1) / time.Millisecond
		h.Timeout = uint32(min(ms, 1<<32-1))
	}
	md, kv := c.outgoing(ctx)
	if call != nil {
		h.Seq = c.seq.Add(1)
		call.seq = h.Seq
	}
	bp := bufpool.Get(max(1024, int(c.sizeHint.Load())))
	buf, span, err := protocol.AppendMessage((*bp)[:0], &protocol.Message{
		Header: h, Service: service, Method: method, Metadata: md, Pairs: kv,
		Codec: cd, Compression: c.opts.comp, CompressMin: c.opts.compressMin,
		MaxFrame: c.opts.limits.MaxFrameSize,
	}, args)
	start := span.Start
	if err != nil {
		err = notSent(err)
	}
	alone := false // the connection's only pending call
	if err == nil && call != nil {
		c.mu.Lock()
		if c.err != nil {
			err = notSent(c.err)
		} else {
			c.pending[h.Seq] = call
			alone = len(c.pending) == 1
			c.takeReader(call, alone)
		}
		c.mu.Unlock()
		// A serial caller switches the socket to raw reads and writes,
		// concurrent calls back (transport.Raw says why).
		transport.SetSerial(c.rw, alone)
	}
	if err == nil {
		// The connection's only call writes its request itself when the
		// writer is idle (one hand-off less, as a lone caller waits for
		// the reply anyway), and tells the server so (FlagSole); with more
		// calls pending the writer goroutine coalesces their requests into
		// fewer syscalls.
		write := c.w.Write
		if alone {
			protocol.SetFlags(buf, start, protocol.FlagSole)
			write = c.w.WriteNow
		}
		if werr := write(buf); werr != nil {
			if call != nil && !c.remove(h.Seq) && call.sync {
				// fail took the call off the table and is completing
				// it: wait for that, so that the caller does not reuse
				// the call (callPool) while fail still writes it. The
				// write failed, so not sent is the outcome.
				<-call.wake
				call.Error = nil
			}
			err = notSent(werr)
		}
	}
	if n := int64(len(buf)); n != c.sizeHint.Load() {
		c.sizeHint.Store(n)
	}
	*bp = buf
	bufpool.Put(bp)
	return err
}

// notSent marks err as a failure before the request reached the wire.
func notSent(err error) error {
	if errors.Is(err, ErrNotSent) {
		return err
	}
	code := fleet.CodeOf(err)
	if code == fleet.Unknown {
		code = fleet.Unavailable
	}
	msg := err.Error()
	if fe, ok := err.(*fleet.Error); ok {
		msg = fe.Message()
	}
	return &notSentError{fleet.NewError(code, msg), err}
}

// notSentError carries a code and matches both ErrNotSent and its cause.
type notSentError struct {
	e     *fleet.Error
	cause error
}

func (e *notSentError) Error() string   { return e.e.Error() }
func (e *notSentError) Unwrap() []error { return []error{e.e, ErrNotSent, e.cause} }

// remove takes a pending call off the table, reporting whether it was
// still pending (false: a response or failure is being delivered).
func (c *Client) remove(seq uint64) bool {
	c.mu.Lock()
	_, ok := c.pending[seq]
	delete(c.pending, seq)
	c.mu.Unlock()
	return ok
}

// finish turns the response frame of a call into its outcome, decoding
// the reply, and releases the frame's buffer.
func (c *Client) finish(call *Call) error {
	if call.respBuf == nil {
		return call.Error
	}
	f := &call.resp
	defer func() {
		bufpool.Put(call.respBuf)
		call.respBuf = nil
		call.resp = protocol.Frame{}
	}()
	if f.MetadataLen() > 0 {
		call.ResponseMetadata = f.Metadata()
	}
	if call.mdSink != nil {
		*call.mdSink = call.ResponseMetadata
	}
	if f.Status != 0 {
		return asShed(fleet.NewError(fleet.Code(f.Status), string(f.Payload)), call.ResponseMetadata)
	}
	if call.Reply == nil {
		return nil
	}
	room, err := protocol.DecompressRoom(f, c.opts.limits.MaxDecompressedSize)
	if err == nil {
		err = protocol.DecodeMessage(f, call.Reply, room, nil)
	}
	return err
}

func (c *Client) readLoop() {
	defer c.r.Close()
	for {
		f, buf, err := c.r.ReadFrame()
		if err != nil {
			c.fail(c.withGoAwayReason(err))
			return
		}
		if c.dispatch(f, buf, true) {
			c.readerTurn() // lent to the next serial call
		}
	}
}

// dispatch handles a frame read off the connection, by the read loop
// (loop) or by a caller reading for itself (selfread.go). It reports
// whether the read loop lent the reader (lendReader).
func (c *Client) dispatch(f protocol.Frame, buf *[]byte, loop bool) (lent bool) {
	c.received.Add(1)
	switch f.Type {
	case protocol.TypeResponse:
		c.mu.Lock()
		call := c.pending[f.Seq]
		delete(c.pending, f.Seq)
		if loop && call != nil && call.sync && len(c.pending) == 0 {
			lent = c.lendReader()
		}
		c.mu.Unlock()
		if call == nil { // the caller gave up on it
			bufpool.Put(buf)
			return false
		}
		call.resp, call.respBuf = f, buf
		if !call.sync {
			call.Error = c.finish(call)
		}
		call.complete()
	case protocol.TypePing:
		bufpool.Put(buf)
		var b [protocol.ControlFrameSize]byte
		out := protocol.AppendControl(b[:0], protocol.TypePong, 0, f.Seq, nil)
		_ = c.w.Write(out)
	case protocol.TypePong:
		c.onPong(f, buf)
	case protocol.TypeGoAway:
		c.onGoAway(&f)
		bufpool.Put(buf)
		if !c.draining.Swap(true) {
			go c.ackGoAway()
		}
	default:
		c.onExtension(f, buf)
	}
	return lent
}

// ackGoAway answers the server's go-away with a go-away of its own once
// every send that passed its draining check is queued, so the server knows
// that no request follows it on this connection.
func (c *Client) ackGoAway() {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	p := protocol.AppendGoAway(nil, &protocol.GoAway{Reason: protocol.GoAwayAck, LastSeq: c.seq.Load()})
	_ = c.w.Write(protocol.AppendControl(nil, protocol.TypeGoAway, 0, 0, p))
}

// Pending returns the number of calls waiting for a response.
func (c *Client) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

// writeLoop runs the writer and the heartbeat.
func (c *Client) writeLoop() {
	var last uint64
	outstanding := false
	err := c.w.Run(c.opts.heartbeat, func() {
		if n := c.received.Load(); n != last {
			last, outstanding = n, false
			return
		}
		if outstanding {
			c.fail(fleet.NewError(fleet.Unavailable, "heartbeat timeout: the server stopped answering"))
			return
		}
		outstanding = true
		var b [protocol.ControlFrameSize]byte
		out := protocol.AppendControl(b[:0], protocol.TypePing, 0, last, nil)
		_ = c.w.Write(out)
	})
	if err != nil {
		c.fail(err)
	}
}

// fail stops the client for good: it closes the connection and fails
// every pending call with an Unavailable error wrapping ErrConnectionLost.
func (c *Client) fail(cause error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	var err error
	if errors.Is(cause, ErrClosed) {
		err = ErrClosed
	} else {
		err = fleet.Errorf(fleet.Unavailable, "%v: %w", cause, ErrConnectionLost)
	}
	c.err = err
	pending := c.pending
	c.pending = nil
	c.mu.Unlock()
	c.w.Fail(err)
	c.nc.Close()
	close(c.done)
	c.helloFinished()
	c.failStreams(err)
	callErr := err
	if err == ErrClosed {
		callErr = fleet.Errorf(fleet.Unavailable, "client closed: %w", ErrConnectionLost)
	}
	for _, call := range pending {
		call.Error = callErr
		call.complete()
	}
}

// Close closes the client. Requests already queued, oneway sends
// included, are written first (for at most a second); calls still waiting
// for a response then fail with Unavailable. It returns nil, also when
// called again.
func (c *Client) Close() error {
	c.w.CloseAndFlush(ErrClosed, time.Second)
	c.fail(ErrClosed)
	return nil
}

// Done is closed when the client has stopped (closed, or its connection
// broke).
func (c *Client) Done() <-chan struct{} { return c.done }

// Err returns why the client stopped, or nil while it works.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Draining reports whether the server announced shutdown (go-away): the
// client then refuses new calls with ErrGoingAway.
func (c *Client) Draining() bool { return c.draining.Load() }

// RemoteAddr returns the server's address.
func (c *Client) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }

// outgoing returns the request metadata of a call made with ctx, as
// protocol.BeginFrame writes it: ctx's (fleet.OutgoingPairs) plus the
// client's auth token under fleet.AuthKey when ctx sets none. It allocates
// only to add the token.
func (c *Client) outgoing(ctx context.Context) (fleet.Metadata, []string) {
	md, kv := fleet.OutgoingPairs(ctx)
	if c.opts.authToken != "" {
		if _, ok := fleet.LookupOutgoing(ctx, fleet.AuthKey); !ok {
			kv = append(kv[:len(kv):len(kv)], fleet.AuthKey, c.opts.authToken)
		}
	}
	return md, kv
}
