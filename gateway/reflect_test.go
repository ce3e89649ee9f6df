package gateway_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	reflectv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/fleetrpc/fleet/gateway"
	"github.com/fleetrpc/fleet/internal/demo"
	"github.com/fleetrpc/fleet/server"
)

// reflectAsker sends one file_containing_symbol request on an open
// reflection stream (v1 or v1alpha) and returns the files of the answer.
type reflectAsker func(t *testing.T, symbol string) [][]byte

func v1Asker(t *testing.T, ctx context.Context, cc *grpc.ClientConn) reflectAsker {
	stream, err := reflectv1.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stream.CloseSend() })
	return func(t *testing.T, symbol string) [][]byte {
		t.Helper()
		req := &reflectv1.ServerReflectionRequest{MessageRequest: &reflectv1.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: symbol}}
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if e := resp.GetErrorResponse(); e != nil {
			t.Fatalf("v1 %s: %v", symbol, e)
		}
		return resp.GetFileDescriptorResponse().GetFileDescriptorProto()
	}
}

func v1alphaAsker(t *testing.T, ctx context.Context, cc *grpc.ClientConn) reflectAsker {
	stream, err := reflectv1alpha.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stream.CloseSend() })
	return func(t *testing.T, symbol string) [][]byte {
		t.Helper()
		req := &reflectv1alpha.ServerReflectionRequest{MessageRequest: &reflectv1alpha.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: symbol}}
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if e := resp.GetErrorResponse(); e != nil {
			t.Fatalf("v1alpha %s: %v", symbol, e)
		}
		return resp.GetFileDescriptorResponse().GetFileDescriptorProto()
	}
}

// TestReflectionAnswersAreSelfContained: every reflection answer (v1 and
// v1alpha) carries the transitive dependencies of its file under the
// names the files import, so a client that builds the file from that one
// answer, with no other file, succeeds: for the demo's Hello (which
// imports benchmark.proto) and Arith (Go types, whose synthesized message
// files it imports), and again when the same stream already sent those
// dependencies in an earlier answer.
func TestReflectionAnswersAreSelfContained(t *testing.T) {
	srv := server.New(server.WithLogger(discard()))
	for _, r := range []any{&demo.Hello{}, demo.Arith{}} {
		if err := srv.Register(r); err != nil {
			t.Fatal(err)
		}
	}
	g := gateway.New(srv, gateway.WithProtoPackage("fleet.demo"))
	cc := grpcConn(t, serveGateway(t, g))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for name, newAsker := range map[string]func(*testing.T, context.Context, *grpc.ClientConn) reflectAsker{"v1": v1Asker, "v1alpha": v1alphaAsker} {
		t.Run(name, func(t *testing.T) {
			ask := newAsker(t, ctx, cc)
			for _, tc := range []struct {
				symbol, method, wantDep string
			}{
				{"fleet.demo.Hello", "Say", "benchmark.proto"},
				{"fleet.demo.Arith", "Add", ""},
				{"fleet.demo.Hello", "Say", "benchmark.proto"}, // same stream, sent before
				{"fleet.demo.Arith", "Add", ""},
			} {
				raw := ask(t, tc.symbol)
				set := &descriptorpb.FileDescriptorSet{}
				names := map[string]bool{}
				for _, b := range raw {
					fd := &descriptorpb.FileDescriptorProto{}
					if err := proto.Unmarshal(b, fd); err != nil {
						t.Fatal(err)
					}
					set.File = append(set.File, fd)
					names[fd.GetName()] = true
				}
				if tc.wantDep != "" && !names[tc.wantDep] {
					t.Fatalf("%s: answer holds %v, not %s", tc.symbol, names, tc.wantDep)
				}
				files, err := protodesc.NewFiles(set)
				if err != nil {
					t.Fatalf("%s: files of one answer do not resolve (%v): %v", tc.symbol, names, err)
				}
				for _, fd := range set.File {
					for _, dep := range fd.GetDependency() {
						if !names[dep] {
							t.Fatalf("%s: %s imports %q, which the answer lacks (%v)", tc.symbol, fd.GetName(), dep, names)
						}
					}
				}
				if _, err := files.FindDescriptorByName(protoreflect.FullName(tc.symbol + "." + tc.method)); err != nil {
					t.Fatalf("%s.%s not in the answer's files: %v", tc.symbol, tc.method, err)
				}
			}
		})
	}
}
