package client

import (
	"context"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/codec"
)

// Interceptor extends a Client around every call and every stream it
// opens, in the manner of connect-go's Interceptor: WrapUnary takes the
// Invoker that performs the rest of the chain for Call, Go and Send, and
// WrapStream the StreamFunc that opens the rest of the chain's stream;
// each returns the function to use instead. A Client calls them once per
// chain when it is made (WrapUnary twice: for Call and Go, and for Send),
// never per call; the functions they return are called concurrently by
// every call and must be safe for that.
//
// A unary wrapper may change the call or its context, fail it without
// calling next, or change its error. For Send, reply is nil and next
// returns once the oneway request is queued; for Go, the chain runs on the
// call's own goroutine and its result completes the *Call.
//
// A stream wrapper may change ctx (metadata, deadline: the stream uses the
// context passed on), refuse the stream by returning an error without
// calling next, and return its own Stream wrapping the one next returned
// (embedding it and overriding Send and Receive) to see each message: the
// typed stream (ServerStreamForClient and its siblings) sends and receives
// through the Stream the chain returns.
//
// UnaryInterceptorFunc and StreamInterceptorFunc adapt a single function.
type Interceptor interface {
	WrapUnary(next Invoker) Invoker
	WrapStream(next StreamFunc) StreamFunc
}

// StreamFunc opens a stream to spec's method: next in a stream
// interceptor's chain. It returns the opened Stream or why it was not
// opened (Unimplemented wrapping ErrStreamsUnsupported against a server
// without streams, a *fleet.Error for a refused open, ...).
type StreamFunc func(ctx context.Context, spec *StreamSpec) (Stream, error)

// StreamSpec names the stream a StreamFunc opens. One is made for each
// stream; interceptors may read it but must not change it.
type StreamSpec struct {
	Service, Method string

	cd     codec.ID      // the messages' codec
	opened *clientStream // the stream the chain's end opened
}

// Stream is the caller's side of one open stream as interceptors see it.
// Send and Receive may run on two goroutines at once (one each); neither
// is safe for concurrent use with itself.
type Stream interface {
	// Send encodes msg and sends it once the server's window allows; it
	// fails once the stream has ended.
	Send(msg any) error
	// Receive decodes the server's next message into msg (a new empty
	// message); at the end it returns io.EOF when the server ended the
	// stream with OK, else the stream's *fleet.Error.
	Receive(msg any) error
	// CloseRequest half-closes the sending side.
	CloseRequest() error
	// Close abandons the stream, cancelling it on the server if it is
	// still running, and releases it; it returns nil and may be called
	// again.
	Close() error
}

// UnaryInterceptorFunc is an Interceptor that wraps calls only; streams
// pass through it untouched.
type UnaryInterceptorFunc func(next Invoker) Invoker

// WrapUnary returns f(next).
func (f UnaryInterceptorFunc) WrapUnary(next Invoker) Invoker { return f(next) }

// WrapStream returns next.
func (f UnaryInterceptorFunc) WrapStream(next StreamFunc) StreamFunc { return next }

// StreamInterceptorFunc is an Interceptor that wraps streams only; calls
// pass through it untouched.
type StreamInterceptorFunc func(next StreamFunc) StreamFunc

// WrapUnary returns next.
func (f StreamInterceptorFunc) WrapUnary(next Invoker) Invoker { return next }

// WrapStream returns f(next).
func (f StreamInterceptorFunc) WrapStream(next StreamFunc) StreamFunc { return f(next) }

// WithInterceptor adds interceptors around Call, Go, Send and every stream
// the Client opens; the first added is the outermost (it runs first and
// sees the result last). A nil interceptor is skipped. Default: none.
func WithInterceptor(ics ...Interceptor) Option {
	return optionFunc(func(o *options) {
		for _, ic := range ics {
			if ic != nil {
				o.interceptors = append(o.interceptors, ic)
			}
		}
	})
}

// chain composes the interceptors' unary wrappers around final, the first
// one outermost. It runs once, when the client is made.
func chain(ics []Interceptor, final Invoker) Invoker {
	h := final
	for i := len(ics) - 1; i >= 0; i-- {
		h = ics[i].WrapUnary(h)
	}
	return h
}

// streamChain composes the interceptors' stream wrappers around
// openSpec, once, when the client is made; nil without interceptors.
func (c *Client) streamChain(ics []Interceptor) StreamFunc {
	if len(ics) == 0 {
		return nil
	}
	f := StreamFunc(c.openSpec)
	for i := len(ics) - 1; i >= 0; i-- {
		f = ics[i].WrapStream(f)
	}
	return f
}

// openSpec is the end of the stream chain: it opens the stream and notes
// it in spec.
func (c *Client) openSpec(ctx context.Context, spec *StreamSpec) (Stream, error) {
	if spec.opened != nil {
		return nil, fleet.NewError(fleet.FailedPrecondition, "stream interceptor opened the stream twice")
	}
	st, err := c.openStreamNow(ctx, spec.Service, spec.Method, spec.cd)
	if err != nil {
		return nil, err
	}
	spec.opened = st
	return st, nil
}

// The clientStream as the Stream the chain returns.

// Send implements Stream.
func (st *clientStream) Send(msg any) error { return st.send(msg) }

// Receive implements Stream.
func (st *clientStream) Receive(msg any) error { return st.Recv(msg) }

// CloseRequest implements Stream.
func (st *clientStream) CloseRequest() error { return st.closeSend() }

// Close implements Stream.
func (st *clientStream) Close() error { st.close(); return nil }

// recvSource is a Stream as the streamrecv.Source a receiver reads.
type recvSource struct{ Stream }

// Recv receives through the Stream.
func (r recvSource) Recv(msg any) error { return r.Receive(msg) }
