package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/gateway"
	"github.com/fleetrpc/fleet/server/reflection"
)

type listFlags struct {
	connFlags
	json bool
}

func newListCmd() *cobra.Command {
	var f listFlags
	cmd := &cobra.Command{
		Use:   "list TARGET [Service]",
		Short: "List a server's services, or one service's methods, or a registry's services",
		Long: `list asks a server's reflection service (fleet.Reflection) what it serves:
without Service, the service names, one a line; with Service, its methods as
Service.Method, one a line. --json prints the whole reflection reply
(services, methods and the codecs the server accepts).

Given a registry without a service (etcd://host:port, zookeeper://host:port,
redis://host:port, nats://host:port), list prints the services the registry
holds, each followed by its instances: address, weight and state (active or
draining). Given static://host1:port1,host2:port2, it asks each server what it
serves. --json prints [{"service", "instances": [...]}].

` + targetHelp + `

` + exitHelp,
		Example: "  fleet list 127.0.0.1:8972\n  fleet list 127.0.0.1:8972 Arith\n  fleet list etcd://127.0.0.1:2379",
		Args:    rangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel, err := commandContext(cmd, &f.connFlags)
			if err != nil {
				return err
			}
			defer cancel()
			if len(args) == 1 && isRegistryRoot(args[0]) {
				list, err := listRegistry(ctx, args[0], &f)
				if err != nil {
					return err
				}
				if f.json {
					return printJSON(cmd.OutOrStdout(), list)
				}
				printRegistry(cmd.OutOrStdout(), list)
				return nil
			}
			t, err := openTarget(args[0], &f.connFlags)
			if err != nil {
				return err
			}
			defer t.close()
			var list reflection.ListReply
			if err := t.reflect(ctx, "List", &reflection.ListRequest{}, &list); err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if len(args) == 2 {
				for _, s := range list.Services {
					if s.Name == args[1] {
						if f.json {
							return printJSON(w, s)
						}
						for _, m := range s.Methods {
							fmt.Fprintf(w, "%s.%s\n", s.Name, m)
						}
						return nil
					}
				}
				msg := fmt.Sprintf("unknown service %q", args[1])
				if hint := suggest(list.Services, args[1], ""); hint != "" {
					msg += "; " + hint
				}
				return &callError{"list", fleet.NewError(fleet.NotFound, msg)}
			}
			if f.json {
				return printJSON(w, list)
			}
			for _, s := range list.Services {
				fmt.Fprintln(w, s.Name)
			}
			return nil
		},
	}
	cmd.SetFlagErrorFunc(flagError)
	f.register(cmd.Flags())
	cmd.Flags().BoolVar(&f.json, "json", false, "print the reflection reply as JSON")
	return cmd
}

// describeFlags are fleet describe's flags.
type describeFlags struct {
	listFlags
	proto   bool
	out     string
	pkg     string
	openapi bool
}

func newDescribeCmd() *cobra.Command {
	var f describeFlags
	cmd := &cobra.Command{
		Use:   "describe TARGET Service[.Method]",
		Short: "Show the JSON shape of a method's argument and reply",
		Long: `describe asks a server's reflection service for the types of one method (or
of every method of a service) and prints, for the argument and the reply, the
Go type and a JSON template; for a protobuf message its definition (from the
reflected descriptors) and its protojson template, for any other type its
JSON Schema. --json prints the reflection reply as JSON.

--proto writes the .proto of a service as the gateway serves it over gRPC
(file fleet/gateway/[PACKAGE.]Service.proto, service Service in package
--package, the gateway's WithProtoPackage): protobuf methods with their real
descriptors, Go-typed methods with the messages the gateway maps their types
to (carried by the server's reflection when it was registered with
reflection.Config{GoTypes: gateway.GoTypeDescriptor}, as fleet demo's servers
are). It prints the service's file on stdout; --out DIR writes it and every
file it imports under DIR, at their import paths, ready for protoc -I DIR.

--openapi writes an OpenAPI 3.1 document (JSON) for the gateway's HTTP/JSON
routes of the named service, or of every service without one: POST
/{Service}/{Method} with the request and reply schemas and the error shape.

` + targetHelp + `

` + exitHelp,
		Example: "  fleet describe 127.0.0.1:8972 Arith.Add\n  fleet describe 127.0.0.1:8972 Hello\n  fleet describe --proto --out protos 127.0.0.1:8972 Hello\n  fleet describe --openapi 127.0.0.1:8972 > openapi.json",
		Args:    rangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.openapi {
				return describeOpenAPI(cmd, args, &f)
			}
			if len(args) != 2 {
				return usagef("describe: want TARGET Service[.Method] (or --openapi TARGET [Service])")
			}
			if f.proto {
				return describeProto(cmd, args, &f)
			}
			if f.out != "" || f.pkg != "" {
				return usagef("--out and --package go with --proto")
			}
			service, method := args[1], ""
			if strings.Contains(args[1], ".") {
				var err error
				if service, method, err = splitMethod(args[1]); err != nil {
					return err
				}
			}
			ctx, cancel, err := commandContext(cmd, &f.connFlags)
			if err != nil {
				return err
			}
			defer cancel()
			t, err := openTarget(args[0], &f.connFlags)
			if err != nil {
				return err
			}
			defer t.close()
			var d reflection.DescribeReply
			err = t.reflect(ctx, "Describe", &reflection.DescribeRequest{Service: service, Method: method}, &d)
			if err != nil && method != "" && fleet.CodeOf(err) == fleet.NotFound {
				// "fleet.Reflection" alone is a service whose name holds a dot.
				var d2 reflection.DescribeReply
				if t.reflect(ctx, "Describe", &reflection.DescribeRequest{Service: args[1]}, &d2) == nil {
					d, err = d2, nil
				}
			}
			if ce, ok := err.(*callError); ok && fleet.CodeOf(err) == fleet.NotFound {
				return t.withSuggestion(ctx, args[1], service, method, ce.err)
			}
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if f.json {
				return printJSON(w, d)
			}
			for i, m := range d.Methods {
				if i > 0 {
					fmt.Fprintln(w)
				}
				printMethod(w, m)
			}
			return nil
		},
	}
	cmd.SetFlagErrorFunc(flagError)
	f.register(cmd.Flags())
	cmd.Flags().BoolVar(&f.json, "json", false, "print the reflection reply as JSON")
	cmd.Flags().BoolVar(&f.proto, "proto", false, "write the service's .proto as the gateway serves it over gRPC")
	cmd.Flags().StringVar(&f.out, "out", "", "with --proto: write the .proto and the files it imports under `DIR` (default: the service's file on stdout)")
	cmd.Flags().StringVar(&f.pkg, "package", "", "with --proto and --openapi: the gateway's proto package (gateway.WithProtoPackage; default none)")
	cmd.Flags().BoolVar(&f.openapi, "openapi", false, "write an OpenAPI 3.1 document for the gateway's HTTP/JSON routes")
	return cmd
}

// describeProto is fleet describe --proto TARGET Service.
func describeProto(cmd *cobra.Command, args []string, f *describeFlags) error {
	service := args[1]
	ctx, cancel, err := commandContext(cmd, &f.connFlags)
	if err != nil {
		return err
	}
	defer cancel()
	t, err := openTarget(args[0], &f.connFlags)
	if err != nil {
		return err
	}
	defer t.close()
	var d reflection.DescribeReply
	err = t.reflect(ctx, "Describe", &reflection.DescribeRequest{Service: service, Streams: true}, &d)
	if ce, ok := err.(*callError); ok && fleet.CodeOf(err) == fleet.NotFound {
		return t.withSuggestion(ctx, service, service, "", ce.err)
	}
	if err != nil {
		return err
	}
	sp, err := buildServiceProto(d, service, f.pkg)
	if err != nil {
		return &callError{"describe --proto", fleet.WrapError(fleet.FailedPrecondition, err)}
	}
	for _, s := range sp.skipped {
		fmt.Fprintf(cmd.ErrOrStderr(), "fleet: left out %s.%s\n", service, s)
	}
	if f.out == "" {
		if len(sp.deps) > 0 {
			var names []string
			for _, d := range sp.deps {
				names = append(names, d.Path())
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "fleet: %s imports %s; --out DIR writes them too\n", sp.file.Path(), strings.Join(names, ", "))
		}
		return printProto(cmd.OutOrStdout(), sp.file)
	}
	paths, err := sp.writeProtos(f.out)
	if err != nil {
		return err
	}
	for _, p := range paths {
		fmt.Fprintln(cmd.OutOrStdout(), p)
	}
	return nil
}

func printJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// printMethod prints one method's argument and reply types.
func printMethod(w io.Writer, m reflection.MethodInfo) {
	fmt.Fprintf(w, "%s.%s\n", m.Service, m.Name)
	printType(w, "args", m.Args)
	printType(w, "reply", m.Reply)
}

func printType(w io.Writer, label string, t reflection.TypeInfo) {
	if t.Protobuf != "" {
		fmt.Fprintf(w, "  %s: %s (Go %s)\n", label, t.Protobuf, t.GoType)
		md, err := messageDescriptor(t)
		if err != nil {
			fmt.Fprintf(w, "    (bad descriptor: %v)\n", err)
			return
		}
		for _, line := range strings.Split(strings.TrimRight(protoText(md), "\n"), "\n") {
			fmt.Fprintf(w, "    %s\n", line)
		}
		tmpl, err := protojson.MarshalOptions{EmitUnpopulated: true}.Marshal(protoTemplate(md))
		var compact bytes.Buffer
		if err == nil && json.Compact(&compact, tmpl) == nil {
			fmt.Fprintf(w, "    JSON (protojson): %s\n", compact.Bytes())
		}
		return
	}
	fmt.Fprintf(w, "  %s: %s\n", label, t.GoType)
	if len(t.Example) > 0 {
		fmt.Fprintf(w, "    JSON: %s\n", t.Example)
	}
	if len(t.JSONSchema) > 0 && len(t.JSONSchema) <= 100 {
		fmt.Fprintf(w, "    JSON Schema: %s\n", t.JSONSchema)
	} else if len(t.JSONSchema) > 0 {
		b, err := indentJSON(t.JSONSchema)
		if err != nil {
			b = t.JSONSchema
		}
		fmt.Fprintln(w, "    JSON Schema:")
		for _, line := range strings.Split(string(b), "\n") {
			fmt.Fprintf(w, "      %s\n", line)
		}
	}
}

// protoText renders md, and the messages and enums its fields use, in
// .proto syntax (fields only: no options, no comments).
func protoText(md protoreflect.MessageDescriptor) string {
	var b strings.Builder
	seen := map[protoreflect.FullName]bool{}
	var queue []protoreflect.Descriptor
	queue = append(queue, md)
	seen[md.FullName()] = true
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		switch x := d.(type) {
		case protoreflect.EnumDescriptor:
			fmt.Fprintf(&b, "enum %s {\n", x.FullName())
			for i := 0; i < x.Values().Len(); i++ {
				v := x.Values().Get(i)
				fmt.Fprintf(&b, "  %s = %d;\n", v.Name(), v.Number())
			}
			b.WriteString("}\n")
		case protoreflect.MessageDescriptor:
			fmt.Fprintf(&b, "message %s {\n", x.FullName())
			fields := x.Fields()
			for i := 0; i < fields.Len(); i++ {
				fd := fields.Get(i)
				var typ string
				switch {
				case fd.IsMap():
					typ = fmt.Sprintf("map<%s, %s>", kindName(fd.MapKey()), kindName(fd.MapValue()))
				default:
					typ = kindName(fd)
				}
				label := ""
				switch {
				case fd.IsMap():
				case fd.Cardinality() == protoreflect.Repeated:
					label = "repeated "
				case fd.Cardinality() == protoreflect.Required:
					label = "required "
				case fd.HasPresence() && fd.ContainingOneof() == nil && fd.Kind() != protoreflect.MessageKind:
					label = "optional "
				}
				fmt.Fprintf(&b, "  %s%s %s = %d;\n", label, typ, fd.Name(), fd.Number())
				for _, sub := range []protoreflect.FieldDescriptor{fd, fd.MapValue()} {
					if sub == nil {
						continue
					}
					var dep protoreflect.Descriptor
					if m := sub.Message(); m != nil && !m.IsMapEntry() {
						dep = m
					} else if e := sub.Enum(); e != nil {
						dep = e
					}
					if dep != nil && !seen[dep.FullName()] {
						seen[dep.FullName()] = true
						queue = append(queue, dep)
					}
				}
			}
			b.WriteString("}\n")
		}
	}
	return b.String()
}

func kindName(fd protoreflect.FieldDescriptor) string {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return string(fd.Message().FullName())
	case protoreflect.EnumKind:
		return string(fd.Enum().FullName())
	}
	return fd.Kind().String()
}

// describeOpenAPI is fleet describe --openapi TARGET [Service]: the
// gateway's document (gateway.OpenAPI) for the named service, or for
// every service the server lists.
func describeOpenAPI(cmd *cobra.Command, args []string, f *describeFlags) error {
	if f.proto || f.out != "" {
		return usagef("--openapi does not go with --proto or --out")
	}
	ctx, cancel, err := commandContext(cmd, &f.connFlags)
	if err != nil {
		return err
	}
	defer cancel()
	t, err := openTarget(args[0], &f.connFlags)
	if err != nil {
		return err
	}
	defer t.close()
	var services []string
	if len(args) == 2 {
		services = []string{args[1]}
	} else {
		var list reflection.ListReply
		if err := t.reflect(ctx, "List", &reflection.ListRequest{}, &list); err != nil {
			return err
		}
		for _, s := range list.Services {
			services = append(services, s.Name)
		}
	}
	var methods []reflection.MethodInfo
	for _, svc := range services {
		var d reflection.DescribeReply
		err := t.reflect(ctx, "Describe", &reflection.DescribeRequest{Service: svc}, &d)
		if ce, ok := err.(*callError); ok && fleet.CodeOf(err) == fleet.NotFound {
			return t.withSuggestion(ctx, svc, svc, "", ce.err)
		}
		if err != nil {
			return err
		}
		methods = append(methods, d.Methods...)
	}
	cfg := gateway.OpenAPIConfig{}
	if t.disc == nil {
		scheme := "http"
		if t.tlsCfg != nil {
			scheme = "https"
		}
		cfg.ServerURL = scheme + "://" + t.addr
	}
	doc, err := gateway.OpenAPI(methods, cfg)
	if err != nil {
		return &callError{"describe --openapi", fleet.WrapError(fleet.Internal, err)}
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", doc)
	return err
}
