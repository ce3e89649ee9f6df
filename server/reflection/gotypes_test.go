package reflection_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/fleetrpc/fleet/internal/testutil"
	"github.com/fleetrpc/fleet/server"
	"github.com/fleetrpc/fleet/server/reflection"
)

// TestRegisterWithGoTypes: with Config.GoTypes, a Go type's description
// carries the message GoTypes maps it to (name and files, which resolve on
// their own); a type GoTypes fails for, and every type without GoTypes,
// carries none; protobuf messages keep their own descriptors.
func TestRegisterWithGoTypes(t *testing.T) {
	srv := server.New()
	calls := map[reflect.Type]int{}
	err := reflection.RegisterWith(srv, reflection.Config{GoTypes: func(t reflect.Type) (protoreflect.MessageDescriptor, error) {
		calls[t]++
		if t == reflect.TypeFor[Shape]() {
			return nil, errors.New("no protobuf form")
		}
		return (&durationpb.Duration{}).ProtoReflect().Descriptor(), nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	for name, rcvr := range map[string]any{"Arith": new(Arith), "Hello": Hello{}} {
		if err := srv.RegisterName(name, rcvr); err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.RegisterFunction("Fn", "Shape", func(ctx context.Context, in *Shape, out *[]byte) error { return nil }); err != nil {
		t.Fatal(err)
	}
	c := dial(t, testutil.Serve(t, srv))
	describe := func(svc, method string) reflection.MethodInfo {
		t.Helper()
		var d reflection.DescribeReply
		if err := c.Call(context.Background(), reflection.Service, "Describe", &reflection.DescribeRequest{Service: svc, Method: method}, &d); err != nil {
			t.Fatal(err)
		}
		return d.Methods[0]
	}
	m := describe("Arith", "Multiply")
	if m.Args.GRPCMessage != "google.protobuf.Duration" || m.Args.Protobuf != "" || len(m.Args.JSONSchema) == 0 {
		t.Fatalf("Arith.Multiply args: %+v", m.Args)
	}
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(m.Args.GRPCFiles, &set); err != nil {
		t.Fatal(err)
	}
	files, err := protodesc.NewFiles(&set)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := files.FindDescriptorByName("google.protobuf.Duration"); err != nil {
		t.Fatalf("GRPCFiles: %v", err)
	}
	if s := describe("Fn", "Shape"); s.Args.GRPCMessage != "" || len(s.Args.GRPCFiles) != 0 || s.Reply.GRPCMessage == "" {
		t.Fatalf("Fn.Shape: args %+v, reply %+v", s.Args, s.Reply)
	}
	if h := describe("Hello", "Say"); h.Args.Protobuf == "" || h.Args.GRPCMessage != "" {
		t.Fatalf("Hello.Say args: %+v", h.Args)
	}
	describe("Arith", "Multiply")
	if n := calls[reflect.TypeFor[Shape]()]; n != 1 {
		t.Fatalf("GoTypes called %d times for Shape, want once", n)
	}

	plain := server.New()
	if err := reflection.Register(plain); err != nil {
		t.Fatal(err)
	}
	if err := plain.RegisterName("Arith", new(Arith)); err != nil {
		t.Fatal(err)
	}
	c = dial(t, testutil.Serve(t, plain))
	if m := describe("Arith", "Multiply"); m.Args.GRPCMessage != "" || len(m.Args.GRPCFiles) != 0 {
		t.Fatalf("without GoTypes: %+v", m.Args)
	}
}
