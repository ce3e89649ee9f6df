package gateway

import (
	"context"
	"io"
	"reflect"
	"sort"
	"strings"

	"github.com/fleetrpc/fleet/server"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	grpcreflect "google.golang.org/grpc/reflection"
	reflectv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// registerIntrospection adds server reflection (v1 and v1alpha) and
// grpc.health.v1 to the gRPC server, and reflection to the Connect and
// gRPC-Web route (g.connect, which it needs built).
func (g *Gateway) registerIntrospection() {
	opts := grpcreflect.ServerOptions{Services: serviceLister{g}, DescriptorResolver: descResolver{g}}
	v1 := selfContained[reflectv1.ServerReflectionRequest, reflectv1.ServerReflectionResponse]{grpcreflect.NewServerV1(opts)}
	v1alpha := selfContained[reflectv1alpha.ServerReflectionRequest, reflectv1alpha.ServerReflectionResponse]{grpcreflect.NewServer(opts)}
	reflectv1.RegisterServerReflectionServer(g.grpc, v1)
	reflectv1alpha.RegisterServerReflectionServer(g.grpc, v1alpha)
	healthpb.RegisterHealthServer(g.grpc, health{g: g})
	// The same servers over Connect and gRPC-Web (connect_reflect.go).
	g.connect.introspection = g.connect.introspectionHandlers(v1, v1alpha)
}

// selfContained makes every answer of a reflection stream carry the
// transitive dependencies of the file it sends, as the reflection
// protocol (grpc/grpc reflection.proto, FileDescriptorResponse) expects,
// so a client can build the file from that one answer. grpc-go's server
// leaves out the files it already sent on the same stream; selfContained
// hands it each request on a stream of its own, so it starts afresh every
// time. Each file goes under the name the files importing it use (its
// path in the registry, e.g. "benchmark.proto").
type selfContained[Req, Resp any] struct {
	inner interface {
		ServerReflectionInfo(grpc.BidiStreamingServer[Req, Resp]) error
	}
}

func (s selfContained[Req, Resp]) ServerReflectionInfo(stream grpc.BidiStreamingServer[Req, Resp]) error {
	for {
		req, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := s.inner.ServerReflectionInfo(&oneRequest[Req, Resp]{BidiStreamingServer: stream, req: req}); err != nil {
			return err
		}
	}
}

// oneRequest is a reflection stream that yields one request and then
// io.EOF; answers go to the real stream.
type oneRequest[Req, Resp any] struct {
	grpc.BidiStreamingServer[Req, Resp]
	req *Req
}

func (o *oneRequest[Req, Resp]) Recv() (*Req, error) {
	if o.req == nil {
		return nil, io.EOF
	}
	r := o.req
	o.req = nil
	return r, nil
}

// grpcServiceName is the gRPC name of a Fleet service.
func (g *Gateway) grpcServiceName(fleetName string) string {
	if g.opts.protoPackage == "" {
		return fleetName
	}
	return g.opts.protoPackage + "." + fleetName
}

// protoFiles synthesizes one .proto file per Fleet service that has
// methods served over gRPC, declaring those methods (other methods are
// left out): unary and streaming methods (server.Server.StreamMethods,
// declared with their client_streaming and server_streaming flags) taking
// and returning protobuf messages, whose files it imports from
// protoregistry.GlobalFiles where generated code registers them, and
// unary methods taking and returning Go types, whose synthesized files
// (goMessageOf) it imports and adds to the returned registry. It runs per
// reflection request, which is rare, so services registered late are
// seen.
func (g *Gateway) protoFiles() (*protoregistry.Files, []string) {
	files := new(protoregistry.Files)
	var names []string
	svcs := g.srv.Services()
	streams := map[string][]server.StreamDesc{}
	for _, d := range g.srv.StreamMethods() {
		streams[d.Service] = append(streams[d.Service], d)
		if _, ok := svcs[d.Service]; !ok {
			svcs[d.Service] = nil
		}
	}
	fleetNames := make([]string, 0, len(svcs))
	for n := range svcs {
		fleetNames = append(fleetNames, n)
	}
	sort.Strings(fleetNames)
	for _, svc := range fleetNames {
		if sd := g.generatedService(svc, svcs[svc], streams[svc]); sd != nil {
			// Generated code (protoc-gen-fleet) registered the service
			// under its .proto name: reflection answers with the .proto
			// file protoc-gen-go registered, found in GlobalFiles.
			names = append(names, string(sd.FullName()))
			continue
		}
		full := g.grpcServiceName(svc)
		sd := &descriptorpb.ServiceDescriptorProto{Name: proto.String(svc)}
		deps := map[string]bool{}
		add := func(m string, args, reply reflect.Type, kind server.StreamKind) {
			if args == nil || reply == nil {
				return
			}
			var in, out protoreflect.MessageDescriptor
			switch {
			case isProto(args) && isProto(reply):
				in, out = messageDesc(args), messageDesc(reply)
			case kind != 0:
				return // streams carry protobuf messages only
			default:
				am, rm, err := goMessagesOf(args, reply)
				if err != nil {
					g.opts.logger.Debug("fleet gateway: method not served over gRPC", "service", svc, "method", m, "err", err)
					return
				}
				for _, f := range []protoreflect.FileDescriptor{am.file, rm.file} {
					if _, err := files.FindFileByPath(f.Path()); err != nil {
						_ = files.RegisterFile(f)
					}
				}
				in, out = am.md, rm.md
			}
			deps[in.ParentFile().Path()] = true
			deps[out.ParentFile().Path()] = true
			md := &descriptorpb.MethodDescriptorProto{
				Name:       proto.String(m),
				InputType:  proto.String("." + string(in.FullName())),
				OutputType: proto.String("." + string(out.FullName())),
			}
			if kind == server.ClientStreaming || kind == server.BidiStreaming {
				md.ClientStreaming = proto.Bool(true)
			}
			if kind == server.ServerStreaming || kind == server.BidiStreaming {
				md.ServerStreaming = proto.Bool(true)
			}
			sd.Method = append(sd.Method, md)
		}
		for _, m := range svcs[svc] {
			if d, ok := g.srv.Method(svc, m); ok {
				add(m, d.ArgType, d.ReplyType, 0)
			}
		}
		for _, d := range streams[svc] {
			if _, unary := g.srv.Method(svc, d.Method); !unary {
				add(d.Method, d.ArgType, d.ReplyType, d.Kind)
			}
		}
		if len(sd.Method) == 0 {
			continue
		}
		fd := &descriptorpb.FileDescriptorProto{
			Name:    proto.String("fleet/gateway/" + full + ".proto"),
			Syntax:  proto.String("proto3"),
			Service: []*descriptorpb.ServiceDescriptorProto{sd},
		}
		if g.opts.protoPackage != "" {
			fd.Package = proto.String(g.opts.protoPackage)
		}
		for p := range deps {
			fd.Dependency = append(fd.Dependency, p)
		}
		sort.Strings(fd.Dependency)
		f, err := protodesc.NewFile(fd, chainResolver{files, protoregistry.GlobalFiles})
		if err != nil {
			g.opts.logger.Debug("fleet gateway: no reflection for service", "service", svc, "err", err)
			continue
		}
		if err := files.RegisterFile(f); err != nil {
			continue
		}
		names = append(names, full)
	}
	return files, names
}

// generatedService returns the descriptor of the .proto service that
// svc is registered from, or nil: a service of protoregistry.GlobalFiles
// whose full name is svc (as protoc-gen-fleet registers it) and that
// declares each of svc's methods (unary ones, then streams) with the same
// kind and the same request and response messages. A Fleet service that
// only shares the name is synthesized as any Go-typed service.
func (g *Gateway) generatedService(svc string, unary []string, streams []server.StreamDesc) protoreflect.ServiceDescriptor {
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		return nil
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return nil
	}
	same := func(name string, args, reply reflect.Type, kind server.StreamKind) bool {
		md := sd.Methods().ByName(protoreflect.Name(name))
		if md == nil || args == nil || reply == nil || !isProto(args) || !isProto(reply) {
			return false
		}
		cs := kind == server.ClientStreaming || kind == server.BidiStreaming
		ss := kind == server.ServerStreaming || kind == server.BidiStreaming
		return md.IsStreamingClient() == cs && md.IsStreamingServer() == ss &&
			md.Input().FullName() == messageDesc(args).FullName() &&
			md.Output().FullName() == messageDesc(reply).FullName()
	}
	for _, m := range unary {
		if md, ok := g.srv.Method(svc, m); !ok || !same(m, md.ArgType, md.ReplyType, 0) {
			return nil
		}
	}
	for _, st := range streams {
		if !same(st.Method, st.ArgType, st.ReplyType, st.Kind) {
			return nil
		}
	}
	return sd
}

// messageDesc returns the descriptor of the message whose struct is t.
func messageDesc(t reflect.Type) protoreflect.MessageDescriptor {
	return reflect.New(t).Interface().(proto.Message).ProtoReflect().Descriptor()
}

// serviceLister lists the gRPC services for reflection: the Fleet
// services with protobuf methods, and the introspection services.
type serviceLister struct{ g *Gateway }

func (l serviceLister) GetServiceInfo() map[string]grpc.ServiceInfo {
	out := l.g.grpc.GetServiceInfo()
	_, names := l.g.protoFiles()
	for _, n := range names {
		out[n] = grpc.ServiceInfo{}
	}
	return out
}

// descResolver finds descriptors in the synthesized files first, then in
// protoregistry.GlobalFiles.
type descResolver struct{ g *Gateway }

func (r descResolver) FindFileByPath(p string) (protoreflect.FileDescriptor, error) {
	files, _ := r.g.protoFiles()
	if fd, err := files.FindFileByPath(p); err == nil {
		return fd, nil
	}
	return protoregistry.GlobalFiles.FindFileByPath(p)
}

func (r descResolver) FindDescriptorByName(n protoreflect.FullName) (protoreflect.Descriptor, error) {
	files, _ := r.g.protoFiles()
	if d, err := files.FindDescriptorByName(n); err == nil {
		return d, nil
	}
	return protoregistry.GlobalFiles.FindDescriptorByName(n)
}

// health answers grpc.health.v1 Check from the Fleet server's health
// (server.Server.ServingStatus): the service "" is the whole server; a
// service is looked up by its gRPC name, then by its Fleet name (the gRPC
// name without its package); the gateway's own gRPC services (health,
// reflection) have the server's status. Unknown services are NotFound.
// Watch and List are not implemented.
type health struct {
	healthpb.UnimplementedHealthServer
	g *Gateway
}

func (h health) Check(_ context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	name := req.GetService()
	st, ok := h.g.srv.ServingStatus(name)
	if !ok {
		if _, own := h.g.grpc.GetServiceInfo()[name]; own {
			st, ok = h.g.srv.ServingStatus("")
		} else if pkg := h.g.opts.protoPackage; pkg != "" && strings.HasPrefix(name, pkg+".") {
			st, ok = h.g.srv.ServingStatus(strings.TrimPrefix(name, pkg+"."))
		} else if i := strings.LastIndexByte(name, '.'); i >= 0 {
			st, ok = h.g.srv.ServingStatus(name[i+1:])
		}
	}
	if !ok {
		return nil, status.Errorf(codes.NotFound, "unknown service %q", name)
	}
	out := healthpb.HealthCheckResponse_NOT_SERVING
	if st == server.StatusServing {
		out = healthpb.HealthCheckResponse_SERVING
	}
	return &healthpb.HealthCheckResponse{Status: out}, nil
}

// chainResolver resolves with the first resolver that knows the name.
type chainResolver []protodesc.Resolver

func (c chainResolver) FindFileByPath(p string) (protoreflect.FileDescriptor, error) {
	for _, r := range c {
		if f, err := r.FindFileByPath(p); err == nil {
			return f, nil
		}
	}
	return nil, protoregistry.NotFound
}

func (c chainResolver) FindDescriptorByName(n protoreflect.FullName) (protoreflect.Descriptor, error) {
	for _, r := range c {
		if d, err := r.FindDescriptorByName(n); err == nil {
			return d, nil
		}
	}
	return nil, protoregistry.NotFound
}
