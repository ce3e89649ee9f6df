package server

import (
	"context"
	"io"
	"reflect"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/internal/streamrecv"
)

// ServerStream is the handler's side of a server-streaming method: it
// sends any number of Res messages. Send is not safe for concurrent use;
// the stream is valid only until the handler returns.
type ServerStream[Res any] struct{ st Stream }

// Send sends one message. It waits while the client's flow-control window
// is exhausted (a slow consumer holds back only this stream) and fails
// with the stream's end (Canceled, DeadlineExceeded, ...) once the
// stream's context is done.
func (s *ServerStream[Res]) Send(msg *Res) error { return s.st.Send(msg) }

// ResponseTrailer returns the trailing metadata sent with the stream's
// end; the handler may set keys until it returns.
func (s *ServerStream[Res]) ResponseTrailer() fleet.Metadata { return s.st.ResponseTrailer() }

func (st *serverStream) trailers() fleet.Metadata {
	if st.trailer == nil {
		st.trailer = fleet.Metadata{}
	}
	return st.trailer
}

// ClientStream is the handler's side of a client-streaming method: it
// receives Req messages until the client half-closes. Not safe for
// concurrent use.
type ClientStream[Req any] struct {
	st Stream
	rx streamrecv.Receiver[Req]
}

// recvSource is a Stream as the streamrecv.Source a receiver reads.
type recvSource struct{ Stream }

// Recv receives through the Stream.
func (r recvSource) Recv(msg any) error { return r.Receive(msg) }

// Receive waits for the next message and reports whether there is one;
// after false, Err says why (nil when the client half-closed).
func (s *ClientStream[Req]) Receive() bool { return s.rx.Next(recvSource{s.st}) }

// Msg returns the message of the last successful Receive.
func (s *ClientStream[Req]) Msg() *Req { return s.rx.Msg() }

// Err returns why Receive returned false, nil for the client's half-close.
func (s *ClientStream[Req]) Err() error { return s.rx.Err() }

// ResponseTrailer returns the trailing metadata sent with the stream's
// end; the handler may set keys until it returns.
func (s *ClientStream[Req]) ResponseTrailer() fleet.Metadata { return s.st.ResponseTrailer() }

// BidiStream is the handler's side of a bidirectional method. Receive and
// Send may be called from two goroutines (one each); neither is safe for
// concurrent use with itself.
type BidiStream[Req, Res any] struct{ st Stream }

// Receive returns the next message, or io.EOF after the client's
// half-close, or the stream's end.
func (s *BidiStream[Req, Res]) Receive() (*Req, error) {
	m := new(Req)
	if err := s.st.Receive(m); err != nil {
		return nil, err
	}
	return m, nil
}

// Send sends one message, waiting for flow-control credit as
// ServerStream.Send does.
func (s *BidiStream[Req, Res]) Send(msg *Res) error { return s.st.Send(msg) }

// ResponseTrailer returns the trailing metadata sent with the stream's
// end; set keys from the handler's goroutine before it returns.
func (s *BidiStream[Req, Res]) ResponseTrailer() fleet.Metadata { return s.st.ResponseTrailer() }

// HandleServerStream serves fn as the server-streaming method
// service.method: the client sends one Req and half-closes, fn sends any
// number of Res and returns; its error (or nil) ends the stream with its
// code and message. It fails when the name is empty or taken by another
// stream method.
func HandleServerStream[Req, Res any](s *Server, service, method string, fn func(ctx context.Context, req *Req, stream *ServerStream[Res]) error) error {
	return s.handleStream(service, method, &streamHandler{run: func(ctx context.Context, st Stream) error {
		req := new(Req)
		if err := st.Receive(req); err != nil {
			if err == io.EOF {
				return fleet.NewError(fleet.InvalidArgument, "server stream opened without a request message")
			}
			return err
		}
		return fn(ctx, req, &ServerStream[Res]{st: st})
	}, kind: kindServer, req: reflect.TypeFor[Req](), res: reflect.TypeFor[Res]()})
}

// HandleClientStream serves fn as the client-streaming method
// service.method: the client sends any number of Req and half-closes; fn
// returns one Res (sent before the stream's end) or an error.
func HandleClientStream[Req, Res any](s *Server, service, method string, fn func(ctx context.Context, stream *ClientStream[Req]) (*Res, error)) error {
	return s.handleStream(service, method, &streamHandler{run: func(ctx context.Context, st Stream) error {
		res, err := fn(ctx, &ClientStream[Req]{st: st})
		if err != nil {
			return err
		}
		if res == nil {
			res = new(Res)
		}
		return st.Send(res)
	}, kind: kindClient, req: reflect.TypeFor[Req](), res: reflect.TypeFor[Res]()})
}

// HandleBidiStream serves fn as the bidirectional method service.method:
// both sides send any number of messages; fn's return ends the stream.
func HandleBidiStream[Req, Res any](s *Server, service, method string, fn func(ctx context.Context, stream *BidiStream[Req, Res]) error) error {
	return s.handleStream(service, method, &streamHandler{run: func(ctx context.Context, st Stream) error {
		return fn(ctx, &BidiStream[Req, Res]{st: st})
	}, kind: kindBidi, req: reflect.TypeFor[Req](), res: reflect.TypeFor[Res]()})
}
