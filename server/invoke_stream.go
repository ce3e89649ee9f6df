package server

import (
	"cmp"
	"context"
	"errors"
	"io"
	"net"
	"reflect"
	"slices"
	"strings"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/internal/streamrecv"
)

// StreamKind is the kind of a streaming method.
type StreamKind int

// The stream kinds: the client sends one message and the server any
// number (ServerStreaming), the client any number and the server one
// (ClientStreaming), or both any number (BidiStreaming).
const (
	ServerStreaming = StreamKind(kindServer)
	ClientStreaming = StreamKind(kindClient)
	BidiStreaming   = StreamKind(kindBidi)
)

// String returns "server", "client" or "bidi".
func (k StreamKind) String() string {
	switch k {
	case ServerStreaming:
		return "server"
	case ClientStreaming:
		return "client"
	case BidiStreaming:
		return "bidi"
	}
	return "unknown"
}

// StreamDesc describes a registered streaming method.
type StreamDesc struct {
	Service, Method string
	Kind            StreamKind
	// ArgType and ReplyType are the types of the messages the client and
	// the server send (the Req and Res of HandleServerStream and its
	// siblings, or of the method forms RegisterStreams accepts; for a
	// protobuf method, the generated message structs).
	ArgType, ReplyType reflect.Type
}

// StreamMethod returns the description of the streaming method
// service.method, or false when no stream handler is registered under
// that name. It is safe for concurrent use and does not allocate.
func (s *Server) StreamMethod(service, method string) (StreamDesc, bool) {
	hv, ok := s.streamHandlers.Load(streamKey(service, method))
	if !ok {
		return StreamDesc{}, false
	}
	h := hv.(*streamHandler)
	return StreamDesc{Service: service, Method: method, Kind: StreamKind(h.kind), ArgType: h.req, ReplyType: h.res}, true
}

// StreamMethods returns every registered streaming method, sorted by
// service then method. It is safe for concurrent use; it allocates the
// returned slice.
func (s *Server) StreamMethods() []StreamDesc {
	var out []StreamDesc
	s.streamHandlers.Range(func(k, _ any) bool {
		svc, method, _ := strings.Cut(k.(string), "\x00")
		if d, ok := s.StreamMethod(svc, method); ok {
			out = append(out, d)
		}
		return true
	})
	slices.SortFunc(out, func(a, b StreamDesc) int {
		return cmp.Or(strings.Compare(a.Service, b.Service), strings.Compare(a.Method, b.Method))
	})
	return out
}

// hasStreamService reports whether a streaming method is registered under
// service (a scan of the stream handlers: for health checks, not per call).
func (s *Server) hasStreamService(service string) bool {
	found := false
	s.streamHandlers.Range(func(k, _ any) bool {
		found = strings.HasPrefix(k.(string), service+"\x00")
		return !found
	})
	return found
}

// StreamCall is one stream handed to InvokeStream by a front end that
// speaks another protocol (the gateway's gRPC side). The messages are
// already framed by that protocol: the stream decodes what Recv returns
// with Codec into the handler's message type, and encodes what the
// handler sends with Codec before giving it to Send.
type StreamCall struct {
	Service, Method string
	// Codec decodes received messages and encodes sent ones. Required.
	Codec codec.Codec
	// Metadata is the stream's request metadata; its fleet.AuthKey entry
	// is the token given to the server's auth function. Not modified.
	Metadata fleet.Metadata
	// RemoteAddr and LocalAddr become the handler's CallInfo addresses.
	RemoteAddr, LocalAddr net.Addr
	// Route names the route the stream came by, as Call.Route does.
	// Default (""): fleet.RouteInProcess.
	Route fleet.Route

	// Recv returns the next encoded message from the client, or io.EOF
	// after the client's half-close, or another error when the client's
	// stream broke (a *fleet.Error keeps its code; others become
	// Canceled). It is called from the handler's receiving goroutine,
	// never concurrently with itself, and must return once the ctx given
	// to InvokeStream is done. It should block while no message is there:
	// that is the stream's flow control towards the client (the handler
	// reads at its own pace, the front end's transport holds the client
	// back). The stream does not retain the slice. Required.
	Recv func() ([]byte, error)
	// Send writes one encoded message to the client, blocking while the
	// client's flow control holds it back; it must return once the ctx
	// given to InvokeStream is done. It is called from the handler's
	// sending goroutine, never concurrently with itself (but concurrently
	// with Recv), and not after InvokeStream returned. It must not retain
	// the slice after returning. Required.
	Send func([]byte) error
	// SendHeader, when set, sends the stream's response headers: the
	// response metadata the handler set (fleet.SetResponseMetadata) by
	// then, possibly empty. InvokeStream calls it once, on the sending
	// goroutine, just before the first Send, or before returning when
	// nothing was sent; keys set after it travel in the trailer
	// InvokeStream returns. It must not retain md. An error fails the
	// Send it preceded as Send's would. Nil (the default): the response
	// metadata is merged into the returned trailer.
	SendHeader func(md fleet.Metadata) error
}

// InvokeStream runs one stream through the same path as a stream opened
// by a native client: the stream handler table, the limits (metadata count
// and size, WithMaxStreamMessage for each received message, the frame
// limit for each sent one), the auth function, the method's interceptor
// chain,
// panic recovery and the Shutdown accounting (Shutdown waits for streams
// running in InvokeStream; streams opened after Shutdown began are refused
// with ShuttingDown). The handler's context is ctx with the stream's
// *fleet.CallInfo: ctx's deadline is the stream's deadline and cancelling
// ctx (the client went away) ends the handler's context, and its Send and
// Receive calls fail with Canceled or DeadlineExceeded.
//
// It returns when the handler returned, with the trailing metadata (the
// handler's ResponseTrailer, and its fleet.SetResponseMetadata keys that
// did not go to call.SendHeader) and the
// error the stream ends with, a *fleet.Error: NotFound for an unknown
// stream method, ResourceExhausted for a message over the limits,
// InvalidArgument when a message does not decode or a server stream's
// client sent no message, the auth function's and the handler's errors
// otherwise (their codes and messages intact). The trailer is returned
// with errors too. The per-connection cap on concurrent streams
// (WithMaxStreamsPerConn) is not applied: the front end's transport has
// its own (HTTP/2's SETTINGS_MAX_CONCURRENT_STREAMS for gRPC). InvokeStream
// is safe for concurrent use.
func (s *Server) InvokeStream(ctx context.Context, call *StreamCall) (trailer fleet.Metadata, err error) {
	s.inflight.Add(1)
	defer s.inflight.Add(-1)
	service, method := []byte(call.Service), []byte(call.Method)
	var refuseMD fleet.Metadata
	refuse := func(err error) (fleet.Metadata, error) {
		s.noteRefused(service, method, err)
		return refuseMD, err
	}
	if call.Recv == nil || call.Send == nil {
		return refuse(fleet.NewError(fleet.InvalidArgument, "stream call without Recv or Send"))
	}
	if err := s.checkCall(&Call{Codec: call.Codec, Metadata: call.Metadata}); err != nil {
		return refuse(err)
	}
	st := &serverStream{srv: s, local: call, codec: call.Codec}
	st.info = fleet.CallInfo{Service: call.Service, Method: call.Method, RemoteAddr: call.RemoteAddr, LocalAddr: call.LocalAddr, Route: routeOr(call.Route)}
	st.info.SetMetadata(call.Metadata)
	if err := s.authorize(&streamCtx{Context: ctx, info: &st.info}, &st.info); err != nil {
		return refuse(err)
	}
	if s.shutdown.Load() {
		return refuse(errShuttingDown)
	}
	slot, md, err := s.admitLimits(service, method, false, ctx)
	if err != nil {
		refuseMD = md
		return refuse(err)
	}
	defer slot.leave()
	if md, err := s.admitStreamAdaptive(); err != nil {
		refuseMD = md
		return refuse(err)
	}
	hv, ok := s.streamHandlers.Load(streamKey(call.Service, call.Method))
	if !ok {
		return refuse(fleet.Errorf(fleet.NotFound, "unknown stream method %s.%s", call.Service, call.Method))
	}
	var cancel context.CancelFunc
	st.ctx, cancel = context.WithCancel(&streamCtx{Context: ctx, info: &st.info})
	st.cancel = cancel
	defer cancel()
	err = st.serve(hv.(*streamHandler))
	if err != nil {
		var fe *fleet.Error
		if !errors.As(err, &fe) || fe.Code() == fleet.OK {
			c := fleet.CodeOf(err)
			if c == fleet.OK {
				c = fleet.Unknown
			}
			err = fleet.WrapError(c, err)
		}
	}
	return st.trailer, err
}

// localSend encodes msg and hands it to the front end.
func (st *serverStream) localSend(msg any) error {
	b, err := codec.MarshalAppend(st.codec, nil, msg)
	if err != nil {
		return fleet.Errorf(fleet.Internal, "encode stream message: %v", err)
	}
	if limit := st.srv.opts.limits.MaxFrameSize; len(b) > limit {
		return fleet.Errorf(fleet.ResourceExhausted, "stream message of %d bytes exceeds the limit of %d", len(b), limit)
	}
	if !st.headerSent && st.local.SendHeader != nil {
		if err := st.sendHeader(); err != nil {
			return err
		}
	}
	if err := st.local.Send(b); err != nil {
		return st.localErr(err)
	}
	return nil
}

// sendHeader hands the response metadata set so far to the front end's
// SendHeader, once; keys set later start a new map, which ends up in the
// trailer.
func (st *serverStream) sendHeader() error {
	st.headerSent = true
	md := st.info.ResponseMetadata
	st.info.ResponseMetadata = nil
	if err := st.local.SendHeader(md); err != nil {
		return st.localErr(err)
	}
	return nil
}

// localRecv takes the front end's next message and decodes it into msg.
func (st *serverStream) localRecv(msg any) error {
	if st.ctx.Err() != nil {
		return st.ctxErr()
	}
	b, err := st.local.Recv()
	if err == io.EOF {
		return io.EOF
	}
	if err != nil {
		return st.localErr(err)
	}
	if limit := st.srv.opts.stream.withDefaults().maxMessage; len(b) > limit {
		return st.localFail(fleet.Errorf(fleet.ResourceExhausted, "stream message of %d bytes exceeds the limit of %d", len(b), limit))
	}
	if err := streamrecv.UnmarshalNew(st.codec, b, msg); err != nil {
		return st.localFail(fleet.Errorf(fleet.InvalidArgument, "decode stream message: %v", err))
	}
	return nil
}

// localFail ends the stream with err (bad input from the client), as fail
// does for a native stream, and returns err.
func (st *serverStream) localFail(err error) error {
	st.failed.CompareAndSwap(nil, &err)
	st.cancel()
	return err
}

// localErr is the error of a front end's failed Send or Recv: the
// stream's end when its context is done, else err with a Fleet code
// (Canceled when it has none: the client's stream broke).
func (st *serverStream) localErr(err error) error {
	if st.ctx.Err() != nil {
		return st.ctxErr()
	}
	var fe *fleet.Error
	if errors.As(err, &fe) {
		return err
	}
	return fleet.WrapError(fleet.Canceled, err)
}
