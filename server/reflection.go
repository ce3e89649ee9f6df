package server

import (
	"context"
	"encoding/json"
	"reflect"
	"sort"
	"sync"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/codec"
)

// ReflectionService is the name of the built-in service through which
// every server describes itself (unless built WithoutReflection). It has
// two methods:
//
//	List(*ReflectionListRequest, *ReflectionList)          services, methods, codecs
//	Describe(*ReflectionDescribeRequest, *ReflectionDescription) argument and reply types
//
// Both take any codec that can encode Go structs (JSON, MessagePack, Gob).
// Calls to it pass through the server's auth function and interceptors
// like any other call. The wire format is described in docs/protocol.md.
const ReflectionService = "fleet.Reflection"

// ReflectionListRequest is the argument of fleet.Reflection.List. It has
// no fields; an empty object (or a nil payload) is a valid request.
type ReflectionListRequest struct{}

// ReflectionList is the reply of fleet.Reflection.List.
type ReflectionList struct {
	// Services are the registered services sorted by name, including
	// fleet.Reflection itself.
	Services []ReflectionServiceInfo `json:"services"`
	// Codecs are the codecs the server accepts, sorted by ID.
	Codecs []ReflectionCodec `json:"codecs"`
}

// ReflectionServiceInfo names one service and its methods, sorted.
// Aliases appear as methods of their own.
type ReflectionServiceInfo struct {
	Name    string   `json:"name"`
	Methods []string `json:"methods"`
}

// ReflectionCodec is one codec registered in the server's process: its
// one-byte ID as carried in the frame header and its Name.
type ReflectionCodec struct {
	ID   uint8  `json:"id"`
	Name string `json:"name"`
}

// ReflectionDescribeRequest is the argument of fleet.Reflection.Describe:
// Service is required; an empty Method describes every method of the
// service.
type ReflectionDescribeRequest struct {
	Service string `json:"service"`
	Method  string `json:"method,omitempty"`
}

// ReflectionDescription is the reply of fleet.Reflection.Describe.
type ReflectionDescription struct {
	// Methods holds the described methods sorted by name.
	Methods []ReflectionMethod `json:"methods"`
	// Codecs are the codecs the server accepts, as in ReflectionList.
	Codecs []ReflectionCodec `json:"codecs"`
}

// ReflectionMethod describes one method: its argument and reply types.
type ReflectionMethod struct {
	Service string         `json:"service"`
	Name    string         `json:"name"`
	Args    ReflectionType `json:"args"`
	Reply   ReflectionType `json:"reply"`
}

// ReflectionType describes the type of a method's argument or reply (the
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
// Example, for both kinds, is encoding/json's encoding of the type's zero
// value: a template of the JSON shape (for protobuf messages, field names
// follow the generated struct's json tags, not protojson).
type ReflectionType struct {
	// GoType is the Go type as reflect prints it, such as "demo.Args".
	GoType            string          `json:"go_type"`
	Protobuf          string          `json:"protobuf,omitempty"`
	FileDescriptorSet []byte          `json:"file_descriptor_set,omitempty"`
	JSONSchema        json.RawMessage `json:"json_schema,omitempty"`
	Example           json.RawMessage `json:"example,omitempty"`
}

// reflection is the receiver of the fleet.Reflection service.
type reflection struct {
	s     *Server
	types sync.Map // reflect.Type -> *ReflectionType, built once per type
}

// registerReflection installs fleet.Reflection unless WithoutReflection
// was given. It bypasses the register hooks: the service is part of every
// server, not an application service to announce.
func (s *Server) registerReflection() {
	for _, p := range s.opts.plugins {
		if _, ok := p.(noReflection); ok {
			return
		}
	}
	r := &reflection{s: s}
	s.registerBuiltin(ReflectionService, map[string]any{"List": r.List, "Describe": r.Describe})
}

// List answers fleet.Reflection.List.
func (r *reflection) List(_ context.Context, _ *ReflectionListRequest, reply *ReflectionList) error {
	svcs := *r.s.services.Load()
	reply.Services = make([]ReflectionServiceInfo, 0, len(svcs))
	for name, svc := range svcs {
		reply.Services = append(reply.Services, ReflectionServiceInfo{Name: name, Methods: svc.methodNames()})
	}
	sort.Slice(reply.Services, func(i, j int) bool { return reply.Services[i].Name < reply.Services[j].Name })
	reply.Codecs = reflectCodecs()
	return nil
}

// Describe answers fleet.Reflection.Describe. An unknown service or method
// fails with NotFound, an empty service name with InvalidArgument.
func (r *reflection) Describe(_ context.Context, req *ReflectionDescribeRequest, reply *ReflectionDescription) error {
	if req.Service == "" {
		return fleet.NewError(fleet.InvalidArgument, "describe: no service given")
	}
	svc := (*r.s.services.Load())[req.Service]
	if svc == nil {
		return fleet.Errorf(fleet.NotFound, "unknown service %q", req.Service)
	}
	names := svc.methodNames()
	if req.Method != "" {
		if svc.methods[req.Method] == nil {
			return fleet.Errorf(fleet.NotFound, "unknown method %q of service %q", req.Method, req.Service)
		}
		names = []string{req.Method}
	}
	for _, n := range names {
		at, rt := methodIOTypes(svc.methods[n])
		reply.Methods = append(reply.Methods, ReflectionMethod{
			Service: req.Service, Name: n,
			Args: *r.describeType(at), Reply: *r.describeType(rt),
		})
	}
	reply.Codecs = reflectCodecs()
	return nil
}

// methodIOTypes returns the types A and R of a method taking *A and *R:
// the one place this file reads the method table's representation.
func methodIOTypes(m *methodType) (args, reply reflect.Type) {
	return reflect.TypeOf(m.newArgs()).Elem(), reflect.TypeOf(m.newReply()).Elem()
}

// describeType returns the (cached) description of t.
func (r *reflection) describeType(t reflect.Type) *ReflectionType {
	if v, ok := r.types.Load(t); ok {
		return v.(*ReflectionType)
	}
	d := &ReflectionType{GoType: t.String()}
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
	}
	v, _ := r.types.LoadOrStore(t, d)
	return v.(*ReflectionType)
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
func reflectCodecs() []ReflectionCodec {
	var out []ReflectionCodec
	for id := 0; id < 256; id++ {
		if c := codec.Get(codec.ID(id)); c != nil {
			out = append(out, ReflectionCodec{ID: uint8(id), Name: c.Name()})
		}
	}
	return out
}
