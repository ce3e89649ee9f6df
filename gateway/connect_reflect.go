package gateway

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"

	"connectrpc.com/connect/v2"
	"connectrpc.com/connect/v2/connecthttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	reflectv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Server reflection over Connect and gRPC-Web. The answers are those of
// the gRPC side: the same grpc-go reflection servers (wrapped by
// selfContained, over the same serviceLister and descResolver), whose
// bidi stream is a connect-go ServerStream adapted to grpc-go's
// BidiStreamingServer. connect-go speaks the protocols (envelopes,
// gRPC-Web trailers, errors); bidi streams need HTTP/2, and connect-go
// answers one over HTTP/1.x with 505 HTTP Version Not Supported and
// Connection: close before anything else.

// reflectionInfo is what a reflection server (grpc-go's, under
// selfContained) offers: its one bidi method.
type reflectionInfo[Req, Resp any] interface {
	ServerReflectionInfo(grpc.BidiStreamingServer[Req, Resp]) error
}

// introspectionHandlers returns the connect-go handlers of the reflection
// procedures (v1 and v1alpha), keyed by path, answered by v1 and v1alpha.
func (c *connectRoute) introspectionHandlers(
	v1 reflectionInfo[reflectv1.ServerReflectionRequest, reflectv1.ServerReflectionResponse],
	v1alpha reflectionInfo[reflectv1alpha.ServerReflectionRequest, reflectv1alpha.ServerReflectionResponse],
) map[string]http.Handler {
	out := map[string]http.Handler{}
	add := func(md protoreflect.MethodDescriptor, fn connect.ServerFunc) {
		spec := connect.Spec{
			Procedure:  "/" + string(md.Parent().FullName()) + "/" + string(md.Name()),
			StreamType: connect.StreamTypeBidi,
			Schema:     md,
		}
		cs := connect.NewServer()
		cs.Register(connect.Method{Spec: spec, Handler: c.authIntrospection(fn)})
		mux := &oneHandler{procedure: spec.Procedure}
		connecthttp.Mount(mux, cs, c.opts...)
		out[spec.Procedure] = mux.h
	}
	add(reflectv1.File_grpc_reflection_v1_reflection_proto.Services().Get(0).Methods().Get(0),
		reflectionFunc(v1, func() *reflectv1.ServerReflectionRequest { return new(reflectv1.ServerReflectionRequest) }))
	add(reflectv1alpha.File_grpc_reflection_v1alpha_reflection_proto.Services().Get(0).Methods().Get(0),
		reflectionFunc(v1alpha, func() *reflectv1alpha.ServerReflectionRequest { return new(reflectv1alpha.ServerReflectionRequest) }))
	return out
}

// authIntrospection runs the server's auth function on the call's
// metadata before fn reads anything, as the gRPC side's interceptor
// (checkIntrospection) does for the same procedures, and answers its
// refusal with its code (Unauthenticated unless it chose one).
func (c *connectRoute) authIntrospection(fn connect.ServerFunc) connect.ServerFunc {
	g := c.g
	return func(ctx context.Context, spec connect.Spec, stream connect.ServerStream) error {
		if g.authOn {
			info, _ := connect.CallInfoForServerContext(ctx)
			md := connectMetadata(info.RequestHeader())
			svc, method := splitProcedure(spec.Procedure)
			if _, err := g.srv.Authenticate(ctx, svc, method, md); err != nil {
				return connectError(err)
			}
		}
		return fn(ctx, spec, stream)
	}
}

// splitProcedure splits "/pkg.Service/Method".
func splitProcedure(p string) (svc, method string) {
	svc, method, _ = strings.Cut(strings.TrimPrefix(p, "/"), "/")
	return svc, method
}

// reflectionFunc is the ServerFunc that hands a Connect or gRPC-Web
// reflection stream to srv.
func reflectionFunc[Req, Resp any](srv reflectionInfo[Req, Resp], newReq func() *Req) connect.ServerFunc {
	return func(ctx context.Context, _ connect.Spec, stream connect.ServerStream) error {
		info, _ := connect.CallInfoForServerContext(ctx)
		err := srv.ServerReflectionInfo(&connectBidi[Req, Resp]{
			ctx: ctx, stream: stream, json: info.Codec == connect.CodecNameJSON, newReq: newReq,
		})
		if err == nil {
			return nil
		}
		var ce *connect.Error
		if errors.As(err, &ce) {
			return ce
		}
		// grpc-go's reflection server returns gRPC statuses (an unknown
		// request kind is InvalidArgument).
		return connectError(fleetError(err))
	}
}

// connectBidi is a connect-go server stream seen as grpc-go's
// BidiStreamingServer, for grpc-go's reflection server: messages are
// decoded and encoded here (binary protobuf or protojson, as the client
// chose), the bytes passing through connect-go's rawCodec. Headers and
// trailers set through it are ignored (the reflection server sets none).
type connectBidi[Req, Resp any] struct {
	ctx    context.Context
	stream connect.ServerStream
	json   bool
	newReq func() *Req
}

var _ grpc.BidiStreamingServer[reflectv1.ServerReflectionRequest, reflectv1.ServerReflectionResponse] = (*connectBidi[reflectv1.ServerReflectionRequest, reflectv1.ServerReflectionResponse])(nil)

func (s *connectBidi[Req, Resp]) Recv() (*Req, error) {
	req := s.newReq()
	if err := s.RecvMsg(req); err != nil {
		return nil, err
	}
	return req, nil
}

func (s *connectBidi[Req, Resp]) Send(m *Resp) error { return s.SendMsg(m) }

func (s *connectBidi[Req, Resp]) RecvMsg(m any) error {
	pm, ok := m.(proto.Message)
	if !ok {
		return connect.Errorf(connect.CodeInternal, "gateway: cannot decode into %T", m)
	}
	var in rawMessage
	if err := s.stream.Receive(&in); err != nil {
		if errors.Is(err, io.EOF) {
			return io.EOF
		}
		return err
	}
	var err error
	if s.json {
		err = protojson.Unmarshal(in, pm)
	} else {
		err = proto.Unmarshal(in, pm)
	}
	if err != nil {
		return connect.Errorf(connect.CodeInvalidArgument, "reflection request: %v", err)
	}
	return nil
}

func (s *connectBidi[Req, Resp]) SendMsg(m any) error {
	pm, ok := m.(proto.Message)
	if !ok {
		return connect.Errorf(connect.CodeInternal, "gateway: cannot encode %T", m)
	}
	var b []byte
	var err error
	if s.json {
		b, err = protojson.Marshal(pm)
	} else {
		b, err = proto.Marshal(pm)
	}
	if err != nil {
		return connect.Errorf(connect.CodeInternal, "reflection response: %v", err)
	}
	out := rawMessage(b)
	return s.stream.Send(&out)
}

func (s *connectBidi[Req, Resp]) Context() context.Context     { return s.ctx }
func (s *connectBidi[Req, Resp]) SetHeader(metadata.MD) error  { return nil }
func (s *connectBidi[Req, Resp]) SendHeader(metadata.MD) error { return s.stream.SendHeaders() }
func (s *connectBidi[Req, Resp]) SetTrailer(metadata.MD)       {}
