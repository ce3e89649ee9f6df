package server

import (
	"context"
	"fmt"
	"runtime"

	"github.com/fleetrpc/fleet"
)

// UnaryFunc runs one unary call (two-way or oneway): args and reply are
// the decoded arguments and the reply to fill, as pointers of the types
// the method was registered with; info is the call's *fleet.CallInfo, the
// value fleet.CallInfoFrom(ctx) returns in the handler. The error is the
// call's outcome (nil, a *fleet.Error, or a plain error that reaches the
// caller with code Unknown).
type UnaryFunc func(ctx context.Context, info *fleet.CallInfo, args, reply any) error

// StreamFunc runs one stream: it returns when the stream's handler
// returned, with the error the stream ends with. info is the stream's
// *fleet.CallInfo; st carries the messages.
type StreamFunc func(ctx context.Context, info *fleet.CallInfo, st Stream) error

// Stream is the server's side of one stream as interceptors see it. An
// interceptor that wants to see each message passes on its own Stream
// that wraps the one it was given (embedding it and overriding Send and
// Receive); the typed handler (ServerStream, ClientStream, BidiStream)
// sends and receives through whatever Stream reached the end of the
// chain. Send and Receive follow the rules of the typed streams: each may
// be called from one goroutine at a time, the two concurrently, and
// neither after the handler returned.
type Stream interface {
	// Kind says which sides send any number of messages.
	Kind() StreamKind
	// Send encodes msg (a pointer of the method's reply message type)
	// and writes it once the client's flow-control window allows; it
	// fails with the stream's end (Canceled, DeadlineExceeded, ...)
	// once the stream is over.
	Send(msg any) error
	// Receive decodes the client's next message into msg, a new empty
	// message (a pointer of the method's request message type); it
	// returns io.EOF after the client's half-close.
	Receive(msg any) error
	// ResponseTrailer returns the trailing metadata sent with the
	// stream's end; keys may be set until the handler returns.
	ResponseTrailer() fleet.Metadata
}

// Interceptor extends the server around every handler, unary calls and
// streams alike, in the manner of connect-go's Interceptor: WrapUnary
// and WrapStream each take the function that runs the rest of the chain
// and return the one to run instead. The server calls them once per
// method, when the method is registered (Register, RegisterName,
// RegisterFunction, Handle, HandleServerStream and its siblings,
// RegisterStreams, and the built-in services when New runs), never per
// call; the functions they return are called concurrently by every call
// of that method and must be safe for that.
//
// A wrapper may change ctx (derive from it or replace it: the chain finds
// its method by construction, not through the context), reject the call
// by returning without calling next, or change the error. Interceptors run
// after the auth function and the admission limits, once the method is
// known and (for unary calls) the arguments are decoded.
//
// UnaryInterceptorFunc and StreamInterceptorFunc adapt a single function.
type Interceptor interface {
	WrapUnary(next UnaryFunc) UnaryFunc
	WrapStream(next StreamFunc) StreamFunc
}

// UnaryInterceptorFunc is an Interceptor that wraps unary calls only;
// streams pass through it untouched.
type UnaryInterceptorFunc func(next UnaryFunc) UnaryFunc

// WrapUnary returns f(next).
func (f UnaryInterceptorFunc) WrapUnary(next UnaryFunc) UnaryFunc { return f(next) }

// WrapStream returns next.
func (f UnaryInterceptorFunc) WrapStream(next StreamFunc) StreamFunc { return next }

// StreamInterceptorFunc is an Interceptor that wraps streams only; unary
// calls pass through it untouched.
type StreamInterceptorFunc func(next StreamFunc) StreamFunc

// WrapUnary returns next.
func (f StreamInterceptorFunc) WrapUnary(next UnaryFunc) UnaryFunc { return next }

// WrapStream returns f(next).
func (f StreamInterceptorFunc) WrapStream(next StreamFunc) StreamFunc { return f(next) }

// WithInterceptor adds interceptors around every handler, unary and
// streaming, of every service registered after New (the built-in ones
// too); the first added is the outermost (it runs first and sees the
// handler's outcome last). A nil interceptor is skipped. Default: none.
func WithInterceptor(ics ...Interceptor) Option {
	return optionFunc(func(o *options) {
		for _, ic := range ics {
			if ic != nil {
				o.interceptors = append(o.interceptors, ic)
			}
		}
	})
}

// unaryChain returns the function that runs method m inside the
// server's interceptors: built once, when m is registered.
func (s *Server) unaryChain(m *methodType) UnaryFunc {
	h := UnaryFunc(func(ctx context.Context, _ *fleet.CallInfo, args, reply any) error {
		return s.safeCall(ctx, m, args, reply)
	})
	ics := s.opts.interceptors
	for i := len(ics) - 1; i >= 0; i-- {
		h = ics[i].WrapUnary(h)
	}
	return h
}

// streamChain returns the function that runs stream handler h inside the
// server's interceptors: built once, when h is registered. The end of the
// chain recovers a panic of the handler into an Internal error.
func (s *Server) streamChain(h *streamHandler) StreamFunc {
	f := StreamFunc(func(ctx context.Context, info *fleet.CallInfo, st Stream) (err error) {
		defer func() {
			if p := recover(); p != nil {
				buf := make([]byte, 4096)
				buf = buf[:runtime.Stack(buf, false)]
				s.opts.logger.Error("fleet server: stream handler panic", "service", info.Service, "method", info.Method, "panic", fmt.Sprint(p), "stack", string(buf))
				err = fleet.Errorf(fleet.Internal, "panic in %s.%s: %v", info.Service, info.Method, p)
			}
		}()
		return h.run(ctx, st)
	})
	ics := s.opts.interceptors
	for i := len(ics) - 1; i >= 0; i-- {
		f = ics[i].WrapStream(f)
	}
	return f
}

// setChain gives m its interceptor chain unless it has one (an alias
// shares its target's methodType, already published). Called with
// s.regMu held, before m is published in the service table.
func (s *Server) setChain(m *methodType) {
	if m.chain == nil {
		m.chain = s.unaryChain(m)
	}
}

// The serverStream as the Stream the chain passes on.

// Kind implements Stream.
func (st *serverStream) Kind() StreamKind { return StreamKind(st.kind) }

// Send implements Stream.
func (st *serverStream) Send(msg any) error { return st.send(msg) }

// Receive implements Stream.
func (st *serverStream) Receive(msg any) error { return st.Recv(msg) }

// ResponseTrailer implements Stream.
func (st *serverStream) ResponseTrailer() fleet.Metadata { return st.trailers() }

// routeOr returns r, or fleet.RouteInProcess when r is empty.
func routeOr(r fleet.Route) fleet.Route {
	if r == "" {
		return fleet.RouteInProcess
	}
	return r
}
