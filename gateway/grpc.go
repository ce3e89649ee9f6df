package gateway

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"reflect"
	"strings"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/server"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/proto"
)

// rawFrame is a gRPC message passed through undecoded: the gateway hands
// the protobuf bytes to Server.Invoke, which decodes them into the Fleet
// method's argument type.
type rawFrame []byte

// unaryCall is what handleGRPC needs for one unary call, in one
// allocation: the request message (in), the Server.Invoke call, and the
// reply with the buffer slice passCodec hands to grpc-go (out, outBuf),
// which the transport holds until it has written the reply.
type unaryCall struct {
	g      *Gateway
	ss     grpc.ServerStream
	in     heldFrame
	extra  rawFrame // a second request, which fails the call
	call   server.Call
	out    mem.SliceBuffer
	outBuf [1]mem.Buffer
}

// codecFor is the call's CodecFor, run by Server.Invoke after auth and
// admission: it waits for the client's half-close (a second request fails
// the call with errManyRequests, as gRPC's cardinality rule asks), then
// answers the method's codec.
func (u *unaryCall) codecFor(d server.MethodDesc) (codec.Codec, error) {
	if err := recvEnd(u.ss, &u.extra); err != nil {
		return nil, err
	}
	return u.g.binaryCodecFor(d)
}

// heldFrame is a unary call's gRPC message left in grpc-go's buffers: the
// codec takes a reference (mem.BufferSlice.Ref) instead of copying it
// out, and handleGRPC frees it once Server.Invoke, which keeps nothing of
// the payload, has returned.
type heldFrame struct{ data mem.BufferSlice }

// bytes returns the message as one slice: the buffer itself when the
// message is in one (the usual case), else a copy.
func (f *heldFrame) bytes() []byte {
	if len(f.data) == 1 {
		return f.data[0].ReadOnlyData()
	}
	return f.data.Materialize()
}

// passCodec is the gRPC server's codec (encoding.CodecV2): rawFrame
// values pass through, copied once out of grpc-go's buffers; proto.Message
// values (the reflection and health services' own messages) are encoded
// with proto.
type passCodec struct{}

func (passCodec) Name() string { return "proto" }

func (passCodec) Marshal(v any) (mem.BufferSlice, error) {
	switch m := v.(type) {
	case *unaryCall:
		m.outBuf[0] = &m.out
		return m.outBuf[:], nil
	case *rawFrame:
		return mem.BufferSlice{mem.SliceBuffer(*m)}, nil
	case proto.Message:
		b, err := proto.Marshal(m)
		return mem.BufferSlice{mem.SliceBuffer(b)}, err
	}
	return nil, status.Errorf(codes.Internal, "gateway: cannot encode %T", v)
}

func (passCodec) Unmarshal(data mem.BufferSlice, v any) error {
	switch m := v.(type) {
	case *heldFrame:
		data.Ref()
		m.data = data
		return nil
	case *rawFrame:
		*m = data.Materialize()
		return nil
	case proto.Message:
		return proto.Unmarshal(data.Materialize(), m)
	}
	return status.Errorf(codes.Internal, "gateway: cannot decode into %T", v)
}

var protoMessageType = reflect.TypeFor[proto.Message]()

// isProto reports whether *t is a protobuf message.
func isProto(t reflect.Type) bool { return reflect.PointerTo(t).Implements(protoMessageType) }

// newGRPC builds the gRPC server: every method goes to the unknown-service
// handler, which calls Server.Invoke. Message sizes are bounded by the
// Fleet server's limits.
func (g *Gateway) newGRPC() *grpc.Server {
	l := g.srv.Limits()
	return grpc.NewServer(append([]grpc.ServerOption{
		grpc.ForceServerCodecV2(passCodec{}),
		grpc.UnknownServiceHandler(g.handleGRPC),
		grpc.MaxRecvMsgSize(l.MaxDecompressedSize),
		grpc.MaxSendMsgSize(l.MaxFrameSize),
	}, g.grpcLimitOptions()...)...)
}

// fleetName maps a gRPC service name to a Fleet service: the name as it
// is when registered, else the part after the last dot (the protobuf
// package removed), as Server.Invoke resolves it.
func (g *Gateway) fleetName(grpcService, method string) (string, server.MethodDesc, bool) {
	return resolveName(grpcService, method, g.srv.Method)
}

// fleetStream is fleetName for streaming methods.
func (g *Gateway) fleetStream(grpcService, method string) (string, server.StreamDesc, bool) {
	return resolveName(grpcService, method, g.srv.StreamMethod)
}

// binaryCodecFor returns the codec Server.Invoke decodes a unary call's
// arguments in binary protobuf (gRPC, and Connect's proto codec) and
// encodes its reply with: ProtobufCodec for methods of protobuf messages,
// a goCodec (one per call: it keeps the decoding error) for Go types (the
// Go-types wire mapping, docs/gateway.md, "Go types over gRPC"). What each
// method's types need is found once per pair of types (g.codecs) and
// reused.
func (g *Gateway) binaryCodecFor(d server.MethodDesc) (codec.Codec, error) {
	key := typePair{d.ArgType, d.ReplyType}
	v, ok := g.codecs.Load(key)
	if !ok {
		e := &methodCodec{proto: isProto(d.ArgType) && isProto(d.ReplyType)}
		if !e.proto {
			e.args, e.reply, e.err = goMessages(d)
		}
		v, _ = g.codecs.LoadOrStore(key, e)
	}
	e := v.(*methodCodec)
	switch {
	case e.proto:
		return codec.ProtobufCodec{}, nil
	case e.err != nil:
		return nil, fleet.Errorf(fleet.Unimplemented, "%s.%s: %v", d.Service, d.Method, e.err)
	}
	// Go types: Invoke decodes the protobuf bytes straight into the
	// argument and encodes the reply straight into protobuf bytes,
	// allocations bounded by maxDecodeCost.
	return &goCodec{args: e.args, reply: e.reply, limit: g.maxDecodeCost(), maxDepth: g.opts.maxDepth}, nil
}

// typePair is a method's argument and reply types, the key of
// Gateway.codecs (bounded by the registered methods).
type typePair struct{ args, reply reflect.Type }

// methodCodec is what binaryCodecFor found for a pair of types.
type methodCodec struct {
	proto       bool // both are protobuf messages
	args, reply *goMessage
	err         error // the types cannot be served over gRPC
}

// resolveName finds service.method with find, by the service's full name
// and then by the part after its last dot.
func resolveName[D any](service, method string, find func(service, method string) (D, bool)) (string, D, bool) {
	if d, ok := find(service, method); ok {
		return service, d, true
	}
	if i := strings.LastIndexByte(service, '.'); i >= 0 {
		if d, ok := find(service[i+1:], method); ok {
			return service[i+1:], d, true
		}
	}
	var zero D
	return "", zero, false
}

// handleGRPCStream serves one gRPC call of a Fleet streaming method
// through Server.InvokeStream. The handler's Receive reads the next gRPC
// message (RecvMsg) and its Send writes one (SendMsg), both on the
// handler's goroutines: no buffer sits between the two flow controls, so
// a slow handler holds back the gRPC client (HTTP/2 window) and a slow
// gRPC client holds back the handler's Send. The response metadata the
// handler set before its first Send become the gRPC headers (sent with
// that message, or with the end when it sent none); its trailers (and
// response metadata set later) become gRPC trailers; its error the gRPC
// status.
func (g *Gateway) handleGRPCStream(ss grpc.ServerStream, name string, d server.StreamDesc) error {
	if (d.ArgType != nil && !isProto(d.ArgType)) || (d.ReplyType != nil && !isProto(d.ReplyType)) {
		return status.Errorf(codes.Unimplemented, "%s.%s does not take and return protobuf messages", name, d.Method)
	}
	ctx := ss.Context()
	call := &server.StreamCall{
		Route:   fleet.RouteGRPC,
		Service: name, Method: d.Method, Codec: codec.ProtobufCodec{}, Metadata: grpcMetadata(ctx),
		Recv: func() ([]byte, error) {
			var in rawFrame
			if err := ss.RecvMsg(&in); err != nil {
				if err == io.EOF {
					if d.Kind == server.ServerStreaming {
						return nil, errNoRequest
					}
					return nil, io.EOF
				}
				return nil, fleetError(err)
			}
			if d.Kind == server.ServerStreaming {
				if err := recvEnd(ss, new(rawFrame)); err != nil {
					return nil, err
				}
			}
			return in, nil
		},
		Send: func(b []byte) error {
			out := rawFrame(b)
			if err := ss.SendMsg(&out); err != nil {
				return fleetError(err)
			}
			return nil
		},
		SendHeader: func(md fleet.Metadata) error {
			if len(md) == 0 {
				return nil // grpc-go sends the (empty) headers itself
			}
			if err := ss.SendHeader(grpcOutgoing(md)); err != nil {
				return fleetError(err)
			}
			return nil
		},
	}
	if p, ok := peer.FromContext(ctx); ok {
		call.RemoteAddr, call.LocalAddr = p.Addr, p.LocalAddr
	}
	trailer, err := g.srv.InvokeStream(ctx, call)
	if len(trailer) > 0 {
		ss.SetTrailer(grpcOutgoing(trailer))
	}
	if err != nil {
		return grpcStatus(err)
	}
	return nil
}

// checkGRPCCodec refuses a gRPC call whose content type names a codec
// other than protobuf (grpcCodecOK): grpc-go, with the gateway's forced
// pass-through codec, would serve "application/grpc+foo" as protobuf and
// answer with that content type, which the client cannot read. The
// refusal is Internal, grpc-go's code for a content subtype with no
// codec, sent before any message (a trailers-only response). Over
// net/http (h2c with WithH2CToHTTP, TLS) serveHTTP refuses the call
// itself, since grpc-go's ServeHTTP sends its status as HTTP trailers
// that a client stopping at the content type never reads.
func checkGRPCCodec(ctx context.Context) error {
	if ct := metadata.ValueFromIncomingContext(ctx, "content-type"); len(ct) > 0 && !grpcCodecOK(ct[0]) {
		return status.Error(codes.Internal, errGRPCCodec)
	}
	return nil
}

const errGRPCCodec = "grpc: the gateway's gRPC route has no codec for this content subtype (it speaks application/grpc+proto)"

// grpcCodecOK reports whether a gRPC content type is protobuf's
// ("application/grpc" or "application/grpc+proto", parameters ignored) or
// not gRPC's at all. "application/grpc+json" is routed to the Connect
// handler before the gRPC route sees it.
func grpcCodecOK(ct string) bool {
	sub, ok := strings.CutPrefix(strings.ToLower(ct), "application/grpc")
	if !ok {
		return true
	}
	if i := strings.IndexByte(sub, ';'); i >= 0 {
		sub = sub[:i]
	}
	sub = strings.TrimSpace(sub)
	return sub == "" || sub == "+proto"
}

// Cardinality violations: a unary or server-stream call whose client
// half-closed without a request message, or sent a second one. gRPC's
// status code table (doc/statuscodes.md in grpc/grpc) and the Connect
// conformance suite call for Unimplemented; grpc-go answers its own
// registered methods with Internal, but the gateway's methods all reach
// its unknown-service handler, which sees a bidi stream and checks
// itself.
var (
	errNoRequest    = fleet.NewError(fleet.Unimplemented, "cardinality violation: no request message for a non-client-streaming method")
	errManyRequests = fleet.NewError(fleet.Unimplemented, "cardinality violation: more than one request message for a non-client-streaming method")
)

// recvEnd reads what follows a non-client-streaming call's request: the
// client's half-close (nil), a second message (errManyRequests), or the
// stream's failure (as a *fleet.Error). It waits for the half-close,
// which a gRPC client sends with or right after the request, as grpc-go
// does for its own unary and server-stream methods; the second message
// is read into extra, within the same receive limit as the first. Both
// callers read it once the caller's token has been checked (a unary
// call's from Server.Invoke's CodecFor, a server stream's from its first
// Recv).
func recvEnd(ss grpc.ServerStream, extra *rawFrame) error {
	switch err := ss.RecvMsg(extra); err {
	case io.EOF:
		return nil
	case nil:
		return errManyRequests
	default:
		return fleetError(err)
	}
}

// fleetError turns an error of grpc-go's stream (a status, or io.EOF when
// the stream is gone) into a *fleet.Error with the same code (Canceled
// for a code beyond 16 or a plain error).
func fleetError(err error) error {
	st, ok := status.FromError(err)
	if !ok || st.Code() == codes.OK || st.Code() > codes.Unauthenticated {
		return fleet.WrapError(fleet.Canceled, err)
	}
	return fleet.NewError(fleet.Code(st.Code()), st.Message())
}

// handleGRPC serves one gRPC call: a stream method's through
// handleGRPCStream, any other through Server.Invoke, which checks the
// caller's token before it looks the method up or decodes anything
// (an unknown method is Unimplemented only for an authenticated caller).
func (g *Gateway) handleGRPC(_ any, ss grpc.ServerStream) error {
	full, ok := grpc.MethodFromServerStream(ss)
	if !ok {
		return status.Error(codes.Internal, "gateway: no method in stream")
	}
	svc, method, ok := strings.Cut(strings.TrimPrefix(full, "/"), "/")
	if !ok {
		return status.Errorf(codes.Unimplemented, "malformed method name %q", full)
	}
	if err := checkGRPCCodec(ss.Context()); err != nil {
		return err
	}
	// Invoke gets the names as the caller gave them (the per-method limits
	// are keyed so); it resolves the protobuf package itself.
	_, _, known := g.fleetName(svc, method)
	if !known {
		if name, sd, ok := g.fleetStream(svc, method); ok {
			return g.handleGRPCStream(ss, name, sd)
		}
	}
	u := &unaryCall{g: g, ss: ss}
	if err := ss.RecvMsg(&u.in); err != nil {
		if err == io.EOF {
			return grpcStatus(errNoRequest)
		}
		return err
	}
	ctx := ss.Context()
	call := &u.call
	*call = server.Call{Service: svc, Method: method, Payload: u.in.bytes(), Metadata: grpcMetadata(ctx), Route: fleet.RouteGRPC,
		CodecFor: u.codecFor}
	if p, ok := peer.FromContext(ctx); ok {
		call.RemoteAddr, call.LocalAddr = p.Addr, p.LocalAddr
	}
	reply, rmd, err := g.srv.Invoke(ctx, call)
	u.in.data.Free()
	call.Payload = nil
	if len(rmd) > 0 {
		_ = ss.SetHeader(grpcOutgoing(rmd))
	}
	if len(call.Trailer) > 0 {
		ss.SetTrailer(grpcOutgoing(call.Trailer))
	}
	if err != nil {
		code := GRPCCode(fleet.CodeOf(err))
		if code == codes.NotFound && !known {
			return status.Error(codes.Unimplemented, fleetMessage(err)) // gRPC's code for an unknown method
		}
		return grpcStatus(err)
	}
	u.out = mem.SliceBuffer(reply)
	return ss.SendMsg(u)
}

// goMessages returns the synthesized messages of a method whose argument
// and reply are not protobuf messages.
func goMessages(d server.MethodDesc) (args, reply *goMessage, err error) {
	return goMessagesOf(d.ArgType, d.ReplyType)
}

// goMessagesOf is goMessages for the types A and R of a method taking *A
// and *R. Methods mixing a protobuf message with a Go type fail.
func goMessagesOf(at, rt reflect.Type) (args, reply *goMessage, err error) {
	if isProto(at) || isProto(rt) {
		return nil, nil, errors.New("gateway: a method mixing a protobuf message and a Go type is not served over gRPC")
	}
	if args, err = goMessageOf(at); err != nil {
		return nil, nil, err
	}
	if reply, err = goMessageOf(rt); err != nil {
		return nil, nil, err
	}
	return args, reply, nil
}

// grpcMetadata returns a gRPC call's metadata as Fleet metadata: what
// grpcTap put in ctx when grpc-go's own transport serves the call, else
// (grpc.Server.ServeHTTP, which runs no tap) the incoming gRPC metadata
// converted by fleetMetadata.
func grpcMetadata(ctx context.Context) fleet.Metadata {
	if md, ok := ctx.Value(grpcMDKey{}).(fleet.Metadata); ok {
		return md
	}
	in, ok := metadata.FromIncomingContext(ctx)
	if !ok {
		return nil
	}
	return fleetMetadata(in)
}

// grpcMDKey is the context key of the Fleet metadata grpcTap made.
type grpcMDKey struct{}

// grpcTap is the gRPC server's tap (grpc.InTapHandle), run by grpc-go's
// transport as each stream opens: it converts the request's headers to
// Fleet metadata once, from the transport's own map, where
// metadata.FromIncomingContext would copy every key and value first. It
// never refuses a stream. grpc-go runs it holding the connection's lock,
// so it does no more than that conversion.
func grpcTap(ctx context.Context, info *tap.Info) (context.Context, error) {
	return context.WithValue(ctx, grpcMDKey{}, fleetMetadata(info.Header)), nil
}

// fleetMetadata turns gRPC metadata into Fleet metadata, leaving out
// HTTP/2 pseudo-headers and the headers of the gRPC protocol itself
// (content-type, te, user-agent, grpc-*); keys are lower-cased. A
// repeated key's values are combined by fleet.Metadata's rule (joined
// with ", "); a "-bin" key's values, which grpc-go hands over decoded,
// are encoded again (base64.RawStdEncoding) and joined with ",". It
// returns nil when nothing is left.
func fleetMetadata(in metadata.MD) fleet.Metadata {
	var md fleet.Metadata
	for k, vs := range in {
		if len(vs) == 0 || strings.HasPrefix(k, ":") {
			continue
		}
		k = strings.ToLower(k) // no allocation when it is already
		if strings.HasPrefix(k, "grpc-") {
			continue
		}
		switch k {
		case "content-type", "te", "user-agent":
			continue
		}
		if md == nil {
			md = make(fleet.Metadata, len(in))
		}
		if fleet.IsBinaryKey(k) {
			enc := make([]string, len(vs))
			for i, v := range vs {
				enc[i] = base64.RawStdEncoding.EncodeToString([]byte(v))
			}
			vs = enc
		}
		if old, ok := md[k]; ok { // the same key in two cases
			vs = append([]string{old}, vs...)
		}
		md[k] = joinValues(k, vs)
	}
	return md
}

// joinValues combines the values a header key arrived with into one
// Fleet metadata value (fleet.Metadata's rule: ", ", or "," for a "-bin"
// key). One value is returned as it is.
func joinValues(k string, vs []string) string {
	if len(vs) == 1 {
		return vs[0]
	}
	return strings.Join(vs, fleet.MetadataSeparator(k))
}

// grpcOutgoing turns Fleet response metadata into grpc-go's: keys
// lower-cased, each value one header line (a combined value stays one
// line, which gRPC clients read as its list). A "-bin" key's value is
// base64 text, possibly comma-separated: each part is decoded (padded or
// not) for grpc-go, which encodes it again; a value that is not base64
// is handed over as it is.
func grpcOutgoing(md fleet.Metadata) metadata.MD {
	out := make(metadata.MD, len(md))
	for k, v := range md {
		k = strings.ToLower(k)
		if fleet.IsBinaryKey(k) {
			if bs, ok := decodeBinValues(v); ok {
				out[k] = append(out[k], bs...)
				continue
			}
		}
		out[k] = append(out[k], v)
	}
	return out
}

// decodeBinValues decodes a "-bin" value: base64 parts separated by
// commas, padded or not, as gRPC's specification allows.
func decodeBinValues(v string) ([]string, bool) {
	var out []string
	for part := range strings.SplitSeq(v, ",") {
		part = strings.TrimSpace(part)
		enc := base64.RawStdEncoding
		if strings.HasSuffix(part, "=") {
			enc = base64.StdEncoding
		}
		b, err := enc.DecodeString(part)
		if err != nil {
			return nil, false
		}
		out = append(out, string(b))
	}
	return out, true
}

// GRPCCode returns the gRPC status code of a Fleet code: codes 0 to 16 are
// the same; ShuttingDown (and anything beyond 16) becomes Unavailable or
// Unknown respectively.
func GRPCCode(c fleet.Code) codes.Code {
	switch {
	case c <= fleet.Unauthenticated:
		return codes.Code(c)
	case c == fleet.ShuttingDown:
		return codes.Unavailable
	}
	return codes.Unknown
}
