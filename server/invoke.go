package server

import (
	"context"
	"errors"
	"net"
	"reflect"
	"strings"
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
	// Service and Method name the method as the caller gave them. When
	// no service has the name Service, and Service holds a dot, the part
	// after its last dot is looked up (a protobuf package prefix, as gRPC
	// clients send it).
	Service, Method string
	// Codec decodes Payload into the arguments and encodes the reply.
	// Either Codec or CodecFor is required.
	Codec codec.Codec
	// CodecFor, when Codec is nil, chooses the codec once the method is
	// looked up (after auth and admission), from its description. An
	// error fails the call with its code (Internal when it has none).
	CodecFor func(MethodDesc) (codec.Codec, error)
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

	// Trailer is an output: Invoke sets it to the response trailer the
	// handler set (fleet.SetResponseTrailer), nil when none, on success
	// and on error alike. A front end sends it after the reply (gRPC and
	// Connect trailers); the reply metadata Invoke returns holds the
	// headers only. The map belongs to the caller once Invoke returned.
	Trailer fleet.Metadata
}

// Invoke runs one call through the server's call pipeline, as a native
// request runs (see the stages in pipeline.go): the protocol limits
// (payload size, metadata count and size), then the auth function before
// anything else about the call is looked at, then admission (ShuttingDown
// once Shutdown began; the rate limits; the adaptive limit, whose backlog
// it waits in within ctx; the server's memory budget, WithMaxPendingBytes,
// for the payload's bytes, waited for within ctx), then the lookup of the
// method, the decoding of the payload (when the codec is a
// codec.BudgetUnmarshaler, what it charges is reserved in the memory
// budget without waiting, on top of the payload, and held until Invoke
// returns; a charge that does not fit refuses the call with
// ResourceExhausted before the handler runs), the method's interceptor
// chain and
// the handler (panics recovered), and the encoding of the reply within
// MaxFrameSize. A
// call refused before its handler runs is reported to the CallRefused
// hooks. Shutdown waits for calls running in Invoke. The handler's context
// is ctx with the call's *fleet.CallInfo, so ctx's deadline is the call's
// deadline and cancelling ctx cancels the handler.
//
// It returns the encoded reply and the response metadata the handler set
// (or the retry-after metadata of a call refused by a limit), and sets
// call.Trailer to the response trailer the handler set. The error is
// a *fleet.Error: Unauthenticated (or the auth function's code) before
// anything else, ShuttingDown, ResourceExhausted when a limit refused the
// call or the payload, metadata or reply exceed the server's limits,
// NotFound for an unknown service or method, InvalidArgument when the
// payload does not decode, the handler's errors otherwise (their messages
// intact). Invoke is safe for concurrent use (with a Call each: it writes
// call.Trailer); it does not count against
// WithMaxConcurrentPerConn, which is per native connection (a front end's
// transport caps its own connections' concurrency).
func (s *Server) Invoke(ctx context.Context, call *Call) (reply []byte, respMD fleet.Metadata, err error) {
	// Counted before the shutdown check: Shutdown sets the flag, then
	// waits for inflight to drop, so a call either is refused or is waited
	// for.
	s.inflight.Add(1)
	defer s.inflight.Add(-1)
	call.Trailer = nil
	service, method := []byte(call.Service), []byte(call.Method)
	refuse := func(md fleet.Metadata, err error) ([]byte, fleet.Metadata, error) {
		s.noteRefused(service, method, err)
		return nil, md, err
	}
	if err := s.checkCall(call); err != nil {
		return refuse(nil, err)
	}
	cctx := &callCtx{Context: ctx}
	cctx.info = fleet.CallInfo{
		Service: call.Service, Method: call.Method,
		RemoteAddr: call.RemoteAddr, LocalAddr: call.LocalAddr, Oneway: call.Oneway,
		Route: routeOr(call.Route),
	}
	cctx.info.SetMetadata(call.Metadata)
	hctx := context.Context(cctx)
	if err := s.authorize(hctx, &cctx.info); err != nil {
		return refuse(nil, err)
	}
	if s.shutdown.Load() {
		return refuse(nil, errShuttingDown)
	}
	slot, md, err := s.admitLimits(service, method, false, ctx)
	if err != nil {
		return refuse(md, err)
	}
	defer slot.leave()
	since, md, err := s.awaitAdaptiveCtx(ctx)
	if err != nil {
		return refuse(md, err)
	}
	ran := false
	defer func() { s.endAdaptive(since, ran, err) }()
	cost := int64(len(call.Payload))
	if !s.mem.reserve(ctx, cost, 0) {
		return refuse(nil, fleet.FromContextError(ctx.Err()))
	}
	defer s.mem.release(cost)
	m, err := s.lookupCall(call)
	if err != nil {
		return refuse(nil, err)
	}
	cd := call.Codec
	if cd == nil {
		if cd, err = call.CodecFor(MethodDesc{Service: m.service, Method: m.name, ArgType: methodTypes(m).args, ReplyType: methodTypes(m).reply}); err != nil {
			return refuse(nil, asCode(err, fleet.Internal))
		}
	}
	start := s.lat.start()
	defer func() { s.lat.done(start) }()
	cctx.info.Service, cctx.info.Method = m.service, m.name

	args, replyV := m.newCall()
	var uerr error
	if bu, ok := cd.(codec.BudgetUnmarshaler); ok {
		d := decodeCharge{mem: &s.mem}
		defer d.release()
		uerr = bu.UnmarshalBudget(call.Payload, args, d.charge)
		if d.err != nil {
			return refuse(nil, d.err)
		}
	} else {
		uerr = cd.Unmarshal(call.Payload, args)
	}
	ran = true
	s.calls.Add(1)
	if uerr != nil {
		err = asCode(uerr, fleet.InvalidArgument)
		if fleet.CodeOf(uerr) == fleet.Unknown {
			err = fleet.Errorf(fleet.InvalidArgument, "decode arguments: %v", uerr)
		}
	}
	if err == nil {
		err = m.chain(hctx, &cctx.info, args, replyV)
	}
	if err == nil && !call.Oneway {
		var merr error
		reply, merr = codec.MarshalAppend(cd, nil, replyV)
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
	call.Trailer = cctx.info.ResponseTrailer
	return reply, cctx.info.ResponseMetadata, err
}

// lookupCall looks up call's method: by its service name, else (a
// protobuf package prefix) by the part after the name's last dot.
func (s *Server) lookupCall(call *Call) (*methodType, error) {
	// Both names are tried without making an error: the second (a gRPC
	// client's "pkg.Service") is the common case of the gateway's routes.
	svcs := *s.services.Load()
	if svc := svcs[call.Service]; svc != nil {
		if m := svc.methods[call.Method]; m != nil {
			return m, nil
		}
	}
	if i := strings.LastIndexByte(call.Service, '.'); i >= 0 {
		if svc := svcs[call.Service[i+1:]]; svc != nil {
			if m := svc.methods[call.Method]; m != nil {
				return m, nil
			}
		}
	}
	return s.lookup([]byte(call.Service), []byte(call.Method))
}

// checkCall applies the protocol limits a native frame would have been
// held to: payload size (MaxDecompressedSize, the bound on decoded bytes),
// name sizes and metadata count and size.
func (s *Server) checkCall(call *Call) error {
	l := &s.opts.limits
	if call.Codec == nil && call.CodecFor == nil {
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

// decodeCharge charges what a codec.BudgetUnmarshaler decodes to the
// server's memory budget (see Invoke): each charge is reserved at once if
// it fits beside everything held, the call's own payload included, else
// refused. Not safe for concurrent use (one decoding).
type decodeCharge struct {
	mem     *memBudget
	charged int64
	err     error // the refusal charge returned, if any
}

// charge reserves n bytes, or returns a ResourceExhausted error.
func (d *decodeCharge) charge(n int64) error {
	if n <= 0 {
		return nil
	}
	if !d.mem.tryReserve(n, 0) {
		d.mem.refused.Add(1)
		d.err = fleet.Errorf(fleet.ResourceExhausted, "decoding the arguments needs %d bytes more, over what the server's memory budget (WithMaxPendingBytes) has free", n)
		return d.err
	}
	d.charged += n
	return nil
}

// release gives back everything charged.
func (d *decodeCharge) release() {
	if d.charged > 0 {
		d.mem.release(d.charged)
	}
}
