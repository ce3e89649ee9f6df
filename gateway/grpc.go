package gateway

import (
	"context"
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
	"google.golang.org/protobuf/proto"
)

// rawFrame is a gRPC message passed through undecoded: the gateway hands
// the protobuf bytes to Server.Invoke, which decodes them into the Fleet
// method's argument type.
type rawFrame []byte

// passCodec is the gRPC server's codec (encoding.CodecV2): rawFrame
// values pass through, copied once out of grpc-go's buffers; proto.Message
// values (the reflection and health services' own messages) are encoded
// with proto.
type passCodec struct{}

func (passCodec) Name() string { return "proto" }

func (passCodec) Marshal(v any) (mem.BufferSlice, error) {
	switch m := v.(type) {
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
	return grpc.NewServer(
		grpc.ForceServerCodecV2(passCodec{}),
		grpc.UnknownServiceHandler(g.handleGRPC),
		grpc.MaxRecvMsgSize(l.MaxDecompressedSize),
		grpc.MaxSendMsgSize(l.MaxFrameSize),
	)
}

// fleetName maps a gRPC service name to a Fleet service: the name as it
// is when registered, else the part after the last dot (the protobuf
// package removed).
func (g *Gateway) fleetName(grpcService, method string) (string, server.MethodDesc, bool) {
	if d, ok := g.srv.Method(grpcService, method); ok {
		return grpcService, d, true
	}
	if i := strings.LastIndexByte(grpcService, '.'); i >= 0 {
		name := grpcService[i+1:]
		if d, ok := g.srv.Method(name, method); ok {
			return name, d, true
		}
	}
	return "", server.MethodDesc{}, false
}

// handleGRPC serves one unary gRPC call.
func (g *Gateway) handleGRPC(_ any, ss grpc.ServerStream) error {
	full, ok := grpc.MethodFromServerStream(ss)
	if !ok {
		return status.Error(codes.Internal, "gateway: no method in stream")
	}
	svc, method, ok := strings.Cut(strings.TrimPrefix(full, "/"), "/")
	if !ok {
		return status.Errorf(codes.Unimplemented, "malformed method name %q", full)
	}
	name, d, ok := g.fleetName(svc, method)
	if !ok {
		return status.Errorf(codes.Unimplemented, "unknown method %s of service %s", method, svc)
	}
	if !isProto(d.ArgType) || !isProto(d.ReplyType) {
		return status.Errorf(codes.Unimplemented, "%s.%s does not take and return protobuf messages", name, method)
	}
	var in rawFrame
	if err := ss.RecvMsg(&in); err != nil {
		return err
	}
	ctx := ss.Context()
	call := &server.Call{Service: name, Method: method, Codec: codec.ProtobufCodec{}, Payload: in, Metadata: grpcMetadata(ctx)}
	if p, ok := peer.FromContext(ctx); ok {
		call.RemoteAddr, call.LocalAddr = p.Addr, p.LocalAddr
	}
	reply, rmd, err := g.srv.Invoke(ctx, call)
	if len(rmd) > 0 {
		_ = ss.SetHeader(metadata.New(rmd))
	}
	if err != nil {
		return status.Error(GRPCCode(fleet.CodeOf(err)), fleetMessage(err))
	}
	out := rawFrame(reply)
	return ss.SendMsg(&out)
}

// grpcMetadata turns the incoming gRPC metadata into Fleet metadata,
// leaving out HTTP/2 pseudo-headers and the headers of the gRPC protocol
// itself (content-type, te, user-agent, grpc-*); repeated values are
// joined with ",".
func grpcMetadata(ctx context.Context) fleet.Metadata {
	in, ok := metadata.FromIncomingContext(ctx)
	if !ok {
		return nil
	}
	var md fleet.Metadata
	for k, vs := range in {
		if len(vs) == 0 || strings.HasPrefix(k, ":") || strings.HasPrefix(k, "grpc-") {
			continue
		}
		switch k {
		case "content-type", "te", "user-agent":
			continue
		}
		if md == nil {
			md = make(fleet.Metadata, len(in))
		}
		md[k] = strings.Join(vs, ",")
	}
	return md
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
