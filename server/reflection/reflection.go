package reflection

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"sync"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/server"
)

// Service is the name under which Register serves reflection. It has two
// methods:
//
//	List(*ListRequest, *ListReply)             services, methods, codecs
//	Describe(*DescribeRequest, *DescribeReply) argument and reply types
//
// Both take any codec that can encode Go structs (JSON, MessagePack, Gob).
// Calls to it pass through the server's auth function and interceptors
// like any other call. The wire format is described in docs/protocol.md.
const Service = "fleet.Reflection"

// ListRequest is the argument of fleet.Reflection.List. It has
// no fields; an empty object (or a nil payload) is a valid request.
type ListRequest struct{}

// ListReply is the reply of fleet.Reflection.List.
type ListReply struct {
	// Services are the registered services sorted by name, including
	// fleet.Reflection itself.
	Services []ServiceInfo `json:"services"`
	// Codecs are the codecs the server accepts, sorted by ID.
	Codecs []CodecInfo `json:"codecs"`
}

// ServiceInfo names one service and its methods, sorted.
// Aliases appear as methods of their own.
type ServiceInfo struct {
	Name    string   `json:"name"`
	Methods []string `json:"methods"`
}

// CodecInfo is one codec registered in the server's process: its
// one-byte ID as carried in the frame header and its Name.
type CodecInfo struct {
	ID   uint8  `json:"id"`
	Name string `json:"name"`
}

// DescribeRequest is the argument of fleet.Reflection.Describe:
// Service is required; an empty Method describes every method of the
// service. With Streams, the streaming methods are described too (and a
// service of streaming methods only is found), each with
// MethodInfo.Stream set; without it only unary methods are, as before.
type DescribeRequest struct {
	Service string `json:"service"`
	Method  string `json:"method,omitempty"`
	Streams bool   `json:"streams,omitempty"`
}

// DescribeReply is the reply of fleet.Reflection.Describe.
type DescribeReply struct {
	// Methods holds the described methods sorted by name.
	Methods []MethodInfo `json:"methods"`
	// Codecs are the codecs the server accepts, as in ListReply.
	Codecs []CodecInfo `json:"codecs"`
}

// MethodInfo describes one method: its argument and reply types. For a
// streaming method (described when DescribeRequest.Streams is set),
// Stream is its kind, "server", "client" or "bidi" (server.StreamKind),
// and Args and Reply are the types of the messages the client and the
// server send; it is empty for a unary method.
type MethodInfo struct {
	Service string   `json:"service"`
	Name    string   `json:"name"`
	Stream  string   `json:"stream,omitempty"`
	Args    TypeInfo `json:"args"`
	Reply   TypeInfo `json:"reply"`
}

// TypeInfo describes the type of a method's argument or reply (the
// type A or R of a method taking *A and *R).
//
// For a generated protobuf message (*A implements proto.Message),
// Protobuf is the message's full name and FileDescriptorSet holds the
// serialized google.protobuf.FileDescriptorSet of the file that declares
// it and of every file it imports, dependencies first, so that a client
// can build the message with dynamicpb and convert it from and to JSON
// with protojson without the generated code. Encode such messages with
// the protobuf codec.
//
// For any other Go type, JSONSchema is a JSON Schema (draft 2020-12)
// derived from the type with the rules of encoding/json (field names
// from json tags, embedded structs flattened, []byte as base64 strings),
// and the JSON codec decodes any instance of it.
//
// For a Go type, when the service was registered with a Config whose
// GoTypes maps the type to a protobuf message (as the gateway serves it
// over gRPC), GRPCMessage is that message's full name and GRPCFiles the
// serialized FileDescriptorSet of its file and imports, dependencies
// first; `fleet describe --proto` writes a .proto from them. Both are
// empty otherwise.
//
// Example, for both kinds, is encoding/json's encoding of the type's zero
// value: a template of the JSON shape (for protobuf messages, field names
// follow the generated struct's json tags, not protojson).
type TypeInfo struct {
	// GoType is the Go type as reflect prints it, such as "demo.Args".
	GoType            string          `json:"go_type"`
	Protobuf          string          `json:"protobuf,omitempty"`
	FileDescriptorSet []byte          `json:"file_descriptor_set,omitempty"`
	JSONSchema        json.RawMessage `json:"json_schema,omitempty"`
	GRPCMessage       string          `json:"grpc_message,omitempty"`
	GRPCFiles         []byte          `json:"grpc_files,omitempty"`
	Example           json.RawMessage `json:"example,omitempty"`
}

// Config tunes RegisterWith. The zero value describes Go types by JSON
// Schema only, as Register does.
type Config struct {
	// GoTypes, when set, maps a Go type that is not a protobuf message
	// (the A of a method taking *A) to the protobuf message that stands
	// for it on the wire, such as gateway.GoTypeDescriptor, the mapping
	// the gateway serves Go-typed methods over gRPC with. It is called
	// once per type, from the calls of fleet.Reflection, and must be safe
	// for concurrent use; a type it fails for has no GRPCMessage.
	GoTypes func(reflect.Type) (protoreflect.MessageDescriptor, error)
}

// reflection is the receiver of the fleet.Reflection service.
type reflection struct {
	srv   *server.Server
	cfg   Config
	types sync.Map // reflect.Type -> *TypeInfo, built once per type
}

// Register serves fleet.Reflection (see Service) on srv, describing the
// services registered on srv when each call is answered, so services
// registered after it are described too. It fails, registering nothing,
// when srv already serves a method of fleet.Reflection. Call it before serving, like any
// registration. A server without it does not describe itself: `fleet
// list` and `describe` then fail with Unimplemented and `fleet call`
// falls back to plain JSON.
func Register(srv *server.Server) error { return RegisterWith(srv, Config{}) }

// RegisterWith is Register with a Config: with Config.GoTypes set, the
// description of a Go type also carries the protobuf message it maps to
// (TypeInfo.GRPCMessage and GRPCFiles). It fails as Register does.
func RegisterWith(srv *server.Server, cfg Config) error {
	if _, taken := srv.Method(Service, "Describe"); taken {
		return fmt.Errorf("reflection: %s.Describe is already registered", Service)
	}
	r := &reflection{srv: srv, cfg: cfg}
	if err := server.Handle(srv, Service, "List", r.List); err != nil {
		return err
	}
	return server.Handle(srv, Service, "Describe", r.Describe)
}

// List answers fleet.Reflection.List.
func (r *reflection) List(_ context.Context, _ *ListRequest, reply *ListReply) error {
	svcs := r.srv.Services()
	reply.Services = make([]ServiceInfo, 0, len(svcs))
	for name, methods := range svcs {
		reply.Services = append(reply.Services, ServiceInfo{Name: name, Methods: methods})
	}
	sort.Slice(reply.Services, func(i, j int) bool { return reply.Services[i].Name < reply.Services[j].Name })
	reply.Codecs = reflectCodecs()
	return nil
}

// Describe answers fleet.Reflection.Describe. An unknown service or method
// fails with NotFound, an empty service name with InvalidArgument.
func (r *reflection) Describe(_ context.Context, req *DescribeRequest, reply *DescribeReply) error {
	if req.Service == "" {
		return fleet.NewError(fleet.InvalidArgument, "describe: no service given")
	}
	names, ok := r.srv.Services()[req.Service]
	var streams []server.StreamDesc
	if req.Streams {
		for _, d := range r.srv.StreamMethods() {
			if d.Service != req.Service {
				continue
			}
			if _, unary := r.srv.Method(d.Service, d.Method); !unary && (req.Method == "" || req.Method == d.Method) {
				streams = append(streams, d)
			}
			ok = true
		}
	}
	if !ok {
		return fleet.Errorf(fleet.NotFound, "unknown service %q", req.Service)
	}
	if req.Method != "" {
		names = nil
		if _, unary := r.srv.Method(req.Service, req.Method); unary || len(streams) == 0 {
			names = []string{req.Method}
		}
	}
	for _, n := range names {
		m, ok := r.srv.Method(req.Service, n)
		if !ok {
			return fleet.Errorf(fleet.NotFound, "unknown method %q of service %q", n, req.Service)
		}
		reply.Methods = append(reply.Methods, MethodInfo{
			Service: req.Service, Name: n,
			Args: *r.describeType(m.ArgType), Reply: *r.describeType(m.ReplyType),
		})
	}
	for _, d := range streams {
		reply.Methods = append(reply.Methods, MethodInfo{
			Service: req.Service, Name: d.Method, Stream: d.Kind.String(),
			Args: *r.describeType(d.ArgType), Reply: *r.describeType(d.ReplyType),
		})
	}
	sort.Slice(reply.Methods, func(i, j int) bool { return reply.Methods[i].Name < reply.Methods[j].Name })
	reply.Codecs = reflectCodecs()
	return nil
}

// DescribeType returns the description of the Go type t (the A of a
// method taking *A) as Describe gives it, without GRPCMessage and
// GRPCFiles: the protobuf descriptors for a generated message, else the
// JSON Schema; and the zero value's JSON. It builds it on each call
// (Describe caches its own); it is safe for concurrent use. The gateway
// uses it to check the fields of HTTP/JSON arguments as `fleet call`
// does.
func DescribeType(t reflect.Type) TypeInfo {
	return *(&reflection{}).describeType(t)
}

// describeType returns the (cached) description of t.
func (r *reflection) describeType(t reflect.Type) *TypeInfo {
	if v, ok := r.types.Load(t); ok {
		return v.(*TypeInfo)
	}
	d := &TypeInfo{GoType: t.String()}
	if ex, err := json.Marshal(reflect.New(t).Interface()); err == nil {
		d.Example = ex
	}
	if reflect.PointerTo(t).Implements(typeOfProtoMessage) {
		md := reflect.New(t).Interface().(proto.Message).ProtoReflect().Descriptor()
		d.Protobuf = string(md.FullName())
		if fds, err := proto.Marshal(fileDescriptorSet(md.ParentFile())); err == nil {
			d.FileDescriptorSet = fds
		}
	} else {
		d.JSONSchema = jsonSchemaOf(t)
		if r.cfg.GoTypes != nil {
			if md, err := r.cfg.GoTypes(t); err == nil && md != nil {
				if fds, err := proto.Marshal(fileDescriptorSet(md.ParentFile())); err == nil {
					d.GRPCMessage, d.GRPCFiles = string(md.FullName()), fds
				}
			}
		}
	}
	v, _ := r.types.LoadOrStore(t, d)
	return v.(*TypeInfo)
}

var typeOfProtoMessage = reflect.TypeFor[proto.Message]()

// fileDescriptorSet collects fd and its transitive imports, each file
// after the files it imports, as protoc --include_imports orders them.
func fileDescriptorSet(fd protoreflect.FileDescriptor) *descriptorpb.FileDescriptorSet {
	set := &descriptorpb.FileDescriptorSet{}
	seen := map[string]bool{}
	var visit func(f protoreflect.FileDescriptor)
	visit = func(f protoreflect.FileDescriptor) {
		if seen[f.Path()] {
			return
		}
		seen[f.Path()] = true
		imps := f.Imports()
		for i := 0; i < imps.Len(); i++ {
			visit(imps.Get(i).FileDescriptor)
		}
		set.File = append(set.File, protodesc.ToFileDescriptorProto(f))
	}
	visit(fd)
	return set
}

// reflectCodecs lists the codecs registered in the process, by ID.
func reflectCodecs() []CodecInfo {
	var out []CodecInfo
	for id := 0; id < 256; id++ {
		if c := codec.Get(codec.ID(id)); c != nil {
			out = append(out, CodecInfo{ID: uint8(id), Name: c.Name()})
		}
	}
	return out
}
