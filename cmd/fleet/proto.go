package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/jhump/protoreflect/desc"
	"github.com/jhump/protoreflect/desc/protoprint"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/fleetrpc/fleet/server/reflection"
)

// serviceProto is the .proto of one service as the gateway serves it over
// gRPC: the service's file and every file it imports.
type serviceProto struct {
	file    protoreflect.FileDescriptor
	deps    []protoreflect.FileDescriptor // transitive imports, each after its own imports
	skipped []string                      // "Method: reason", for methods gRPC does not carry
}

// buildServiceProto writes the file the gateway synthesizes for service
// (gateway/reflect.go protoFiles): fleet/gateway/{pkg.}{Service}.proto in
// package pkg, declaring the unary and streaming methods (d described
// with DescribeRequest.Streams) whose argument and reply are
// both protobuf messages (with their real descriptors) or both Go types
// that the server's reflection maps to messages (TypeInfo.GRPCMessage,
// the gateway's own mapping; streams carry protobuf messages only).
// Other methods are left out, as the gateway
// leaves them out, and named in skipped.
func buildServiceProto(d reflection.DescribeReply, service, pkg string) (*serviceProto, error) {
	set := &descriptorpb.FileDescriptorSet{}
	seen := map[string]bool{}
	addFiles := func(raw []byte) error {
		var s descriptorpb.FileDescriptorSet
		if err := proto.Unmarshal(raw, &s); err != nil {
			return err
		}
		for _, f := range s.File {
			if !seen[f.GetName()] {
				seen[f.GetName()] = true
				set.File = append(set.File, f)
			}
		}
		return nil
	}
	sp := &serviceProto{}
	sd := &descriptorpb.ServiceDescriptorProto{Name: proto.String(service)}
	deps := map[string]bool{}
	type ref struct{ name, files string }
	for _, m := range d.Methods {
		var in, out ref
		switch {
		case m.Args.Protobuf != "" && m.Reply.Protobuf != "":
			in, out = ref{m.Args.Protobuf, ""}, ref{m.Reply.Protobuf, ""}
			if err := addFiles(m.Args.FileDescriptorSet); err != nil {
				return nil, fmt.Errorf("%s.%s: descriptor of %s: %w", service, m.Name, m.Args.Protobuf, err)
			}
			if err := addFiles(m.Reply.FileDescriptorSet); err != nil {
				return nil, fmt.Errorf("%s.%s: descriptor of %s: %w", service, m.Name, m.Reply.Protobuf, err)
			}
		case m.Stream != "":
			sp.skipped = append(sp.skipped, m.Name+": a stream of Go types, which the gateway does not serve over gRPC (streams carry protobuf messages only)")
			continue
		case m.Args.Protobuf != "" || m.Reply.Protobuf != "":
			sp.skipped = append(sp.skipped, m.Name+": it mixes a protobuf message and a Go type, which the gateway does not serve over gRPC")
			continue
		case m.Args.GRPCMessage != "" && m.Reply.GRPCMessage != "":
			in, out = ref{m.Args.GRPCMessage, ""}, ref{m.Reply.GRPCMessage, ""}
			if err := addFiles(m.Args.GRPCFiles); err != nil {
				return nil, fmt.Errorf("%s.%s: descriptor of %s: %w", service, m.Name, m.Args.GoType, err)
			}
			if err := addFiles(m.Reply.GRPCFiles); err != nil {
				return nil, fmt.Errorf("%s.%s: descriptor of %s: %w", service, m.Name, m.Reply.GoType, err)
			}
		default:
			sp.skipped = append(sp.skipped, fmt.Sprintf("%s: the server's reflection maps no protobuf message to %s -> %s (the gateway does not serve it over gRPC, or the server registered reflection without reflection.Config.GoTypes = gateway.GoTypeDescriptor)",
				m.Name, m.Args.GoType, m.Reply.GoType))
			continue
		}
		md := &descriptorpb.MethodDescriptorProto{
			Name:       proto.String(m.Name),
			InputType:  proto.String("." + in.name),
			OutputType: proto.String("." + out.name),
		}
		if m.Stream == "client" || m.Stream == "bidi" {
			md.ClientStreaming = proto.Bool(true)
		}
		if m.Stream == "server" || m.Stream == "bidi" {
			md.ServerStreaming = proto.Bool(true)
		}
		sd.Method = append(sd.Method, md)
		for _, r := range []ref{in, out} {
			deps[r.name] = true
		}
	}
	if len(sd.Method) == 0 {
		return nil, fmt.Errorf("service %q has no method the gateway serves over gRPC:\n  %s", service, strings.Join(sp.skipped, "\n  "))
	}
	files, err := protodesc.NewFiles(set)
	if err != nil {
		return nil, fmt.Errorf("descriptors of %s: %w", service, err)
	}
	full := service
	if pkg != "" {
		full = pkg + "." + service
	}
	fd := &descriptorpb.FileDescriptorProto{
		Name:    proto.String("fleet/gateway/" + full + ".proto"),
		Syntax:  proto.String("proto3"),
		Service: []*descriptorpb.ServiceDescriptorProto{sd},
	}
	if pkg != "" {
		fd.Package = proto.String(pkg)
	}
	imports := map[string]bool{}
	for name := range deps {
		md, err := files.FindDescriptorByName(protoreflect.FullName(name))
		if err != nil {
			return nil, fmt.Errorf("message %s: %w", name, err)
		}
		imports[md.ParentFile().Path()] = true
	}
	for p := range imports {
		fd.Dependency = append(fd.Dependency, p)
	}
	sort.Strings(fd.Dependency)
	f, err := protodesc.NewFile(fd, files)
	if err != nil {
		return nil, fmt.Errorf("service %q: %w", service, err)
	}
	sp.file = f
	done := map[string]bool{}
	var visit func(protoreflect.FileDescriptor)
	visit = func(f protoreflect.FileDescriptor) {
		for i := 0; i < f.Imports().Len(); i++ {
			imp := f.Imports().Get(i).FileDescriptor
			if !done[imp.Path()] {
				done[imp.Path()] = true
				visit(imp)
				sp.deps = append(sp.deps, imp)
			}
		}
	}
	visit(f)
	return sp, nil
}

// printProto prints fd in .proto syntax.
func printProto(w io.Writer, fd protoreflect.FileDescriptor) error {
	wrapped, err := desc.WrapFile(fd)
	if err != nil {
		return err
	}
	return (&protoprint.Printer{}).PrintProtoFile(wrapped, w)
}

// writeProtos writes the service's file and every file it imports under
// dir, each at its import path, and returns the paths written, the
// service's file first.
func (sp *serviceProto) writeProtos(dir string) ([]string, error) {
	var paths []string
	for _, f := range append([]protoreflect.FileDescriptor{sp.file}, sp.deps...) {
		p := filepath.Join(dir, filepath.FromSlash(f.Path()))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, err
		}
		out, err := os.Create(p)
		if err != nil {
			return nil, err
		}
		err = printProto(out, f)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		paths = append(paths, p)
	}
	return paths, nil
}
