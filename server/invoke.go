package server

import (
	"context"
	"errors"
	"net"
	"reflect"
	"sync"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/protocol"
)

// Call is one call handed to Invoke by a front end that speaks another
// protocol (the gateway's gRPC, HTTP/JSON and JSON-RPC 2.0 sides). The
// payload is already framed by that protocol: Invoke decodes it with Codec
// into the method's argument type, exactly as a native request's payload
// is decoded with the frame's codec.
type Call struct {
	Service, Method string
	// Codec decodes Payload into the arguments and encodes the reply.
	// Required.
	Codec codec.Codec
	// Payload is the encoded arguments. Invoke does not retain it.
	Payload []byte
	// Metadata is the request metadata; its fleet.AuthKey entry is the
	// token given to the server's auth function. Invoke does not modify
	// it.
	Metadata fleet.Metadata
	// RemoteAddr and LocalAddr become the handler's CallInfo addresses.
	RemoteAddr, LocalAddr net.Addr
	// Oneway runs the call as a oneway send: the handler runs to the end
	// and Invoke returns its error, but no reply is encoded.
	Oneway bool
	// Route names the route the call came by, for the handler's CallInfo
	// (interceptors label their records with it): fleet.RouteGRPC,
	// fleet.RouteHTTP, fleet.RouteJSONRPC, ... Default (""):
	// fleet.RouteInProcess.
	Route fleet.Route
}

// Invoke runs one call through the same path as a native request: the
// service table, the limits (payload size, metadata count and size), the
// auth function, the method's interceptor chain, panic recovery and the Shutdown accounting (Shutdown waits
// for calls running in Invoke; calls that arrive after Shutdown began are
// refused with ShuttingDown). The handler's context is ctx with the call's
// *fleet.CallInfo, so ctx's deadline is the call's deadline and cancelling
// ctx cancels the handler.
//
// It returns the encoded reply and the response metadata the handler set.
// The error is a *fleet.Error: NotFound for an unknown service or method,
// ResourceExhausted when the payload, metadata or reply exceed the server's
// limits, InvalidArgument when the payload does not decode, the auth
// function's and the handler's errors otherwise (their messages intact).
// The response metadata is returned with errors too. Invoke is safe for
// concurrent use; it does not count against WithMaxConcurrentPerConn,
// which is per native connection.
func (s *Server) Invoke(ctx context.Context, call *Call) (reply []byte, respMD fleet.Metadata, err error) {
	// Counted before the shutdown check: Shutdown sets the flag, then
	// waits for inflight to drop, so a call either is refused or is waited
	// for.
	s.inflight.Add(1)
	defer s.inflight.Add(-1)
	if s.shutdown.Load() {
		return nil, nil, errShuttingDown
	}
	svc := (*s.services.Load())[call.Service]
	if svc == nil {
		return nil, nil, unknown([]byte(call.Service), []byte(call.Method), false)
	}
	m := svc.methods[call.Method]
	if m == nil {
		return nil, nil, unknown([]byte(call.Service), []byte(call.Method), true)
	}
	if err := s.checkCall(call); err != nil {
		return nil, nil, err
	}
	s.calls.Add(1)
	start := s.lat.start()
	defer func() { s.lat.done(start) }()

	cctx := &callCtx{Context: ctx}
	cctx.info = fleet.CallInfo{
		Service: m.service, Method: m.name,
		RemoteAddr: call.RemoteAddr, LocalAddr: call.LocalAddr, Oneway: call.Oneway,
		Route: routeOr(call.Route),
	}
	cctx.info.SetMetadata(call.Metadata)
	hctx := context.Context(cctx)

	args, replyV := m.newCall()
	if uerr := call.Codec.Unmarshal(call.Payload, args); uerr != nil {
		err = fleet.Errorf(fleet.InvalidArgument, "decode arguments: %v", uerr)
	}
	if err == nil && s.opts.auth != nil {
		if aerr := s.opts.auth(hctx, &cctx.info, authToken(&cctx.info)); aerr != nil {
			err = asCode(aerr, fleet.Unauthenticated)
		}
	}
	if err == nil {
		err = m.chain(hctx, &cctx.info, args, replyV)
	}
	if err == nil && !call.Oneway {
		var merr error
		reply, merr = codec.MarshalAppend(call.Codec, nil, replyV)
		switch {
		case merr != nil:
			err = fleet.Errorf(fleet.Internal, "encode reply: %v", merr)
		case len(reply) > s.opts.limits.MaxFrameSize:
			err = fleet.Errorf(fleet.ResourceExhausted, "reply of %d bytes exceeds the limit of %d", len(reply), s.opts.limits.MaxFrameSize)
		}
		if err != nil {
			reply = nil
		}
	}
	if err != nil {
		// Every error leaves as a *fleet.Error; a plain error keeps its
		// message and becomes Unknown, as on the native path.
		var fe *fleet.Error
		if !errors.As(err, &fe) || fe.Code() == fleet.OK {
			err = fleet.WrapError(fleet.CodeOf(err), err)
			if fleet.CodeOf(err) == fleet.OK {
				err = fleet.WrapError(fleet.Unknown, err)
			}
		}
	}
	return reply, cctx.info.ResponseMetadata, err
}

// checkCall applies the protocol limits a native frame would have been
// held to: payload size (MaxDecompressedSize, the bound on decoded bytes),
// name sizes and metadata count and size.
func (s *Server) checkCall(call *Call) error {
	l := &s.opts.limits
	if call.Codec == nil {
		return fleet.NewError(fleet.InvalidArgument, "no codec")
	}
	if len(call.Payload) > l.MaxDecompressedSize {
		return fleet.Errorf(fleet.ResourceExhausted, "payload of %d bytes exceeds the limit of %d", len(call.Payload), l.MaxDecompressedSize)
	}
	if len(call.Metadata) > l.MaxMetadataCount {
		return fleet.Errorf(fleet.ResourceExhausted, "%d metadata pairs exceed the limit of %d", len(call.Metadata), l.MaxMetadataCount)
	}
	n := 0
	for k, v := range call.Metadata {
		n += len(k) + len(v)
	}
	if n > l.MaxMetadataSize {
		return fleet.Errorf(fleet.ResourceExhausted, "metadata of %d bytes exceeds the limit of %d", n, l.MaxMetadataSize)
	}
	return nil
}

// ServeConn serves the native Fleet protocol on nc, which was accepted
// elsewhere (a gateway that sniffed the first bytes and replays them), as
// Serve does for each accepted connection: the ConnAccept hooks run first,
// and Shutdown and Close end it like any other connection. It returns when
// the connection is closed; nc is closed then. After Shutdown or Close it
// closes nc at once.
func (s *Server) ServeConn(nc net.Conn) { s.serveConn(nc) }

// Limits returns the server's protocol limits, with defaults applied.
// Front ends use them to bound request bodies before reading them.
func (s *Server) Limits() protocol.Limits { return s.opts.limits }

// MethodDesc describes a registered method: the types its handler takes.
type MethodDesc struct {
	Service, Method string
	// ArgType and ReplyType are the element types of the handler's *A and
	// *R parameters (for a protobuf method, the generated message
	// structs).
	ArgType, ReplyType reflect.Type
}

// Method returns the description of service.method, or false when it is
// not registered. It is safe for concurrent use; it allocates only the
// first time a method is described.
func (s *Server) Method(service, method string) (MethodDesc, bool) {
	svc := (*s.services.Load())[service]
	if svc == nil {
		return MethodDesc{}, false
	}
	m := svc.methods[method]
	if m == nil {
		return MethodDesc{}, false
	}
	return MethodDesc{Service: service, Method: method, ArgType: methodTypes(m).args, ReplyType: methodTypes(m).reply}, true
}

// typePair is a method's argument and reply element types.
type typePair struct{ args, reply reflect.Type }

// methodTypesCache maps a *methodType to its typePair, found once from a
// value of each (methods are never removed, so entries stay valid).
var methodTypesCache sync.Map

func methodTypes(m *methodType) typePair {
	if v, ok := methodTypesCache.Load(m); ok {
		return v.(typePair)
	}
	tp := typePair{args: reflect.TypeOf(m.newArgs()).Elem(), reply: reflect.TypeOf(m.newReply()).Elem()}
	methodTypesCache.Store(m, tp)
	return tp
}

// ShuttingDown reports whether Shutdown or Close has begun: new calls and
// connections are refused.
func (s *Server) ShuttingDown() bool { return s.shutdown.Load() }
