package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect/v2"
	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/gateway"
	"github.com/fleetrpc/fleet/internal/demo"
	"github.com/fleetrpc/fleet/server"
	reflectv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
)

// reflectVersion is one version of the reflection protocol as a
// connect-go client sees it: its procedure, its requests and what its
// answers hold.
type reflectVersion struct {
	procedure string
	list      func() proto.Message                             // list_services
	symbol    func(string) proto.Message                       // file_containing_symbol
	newResp   func() proto.Message                             // an empty response
	answer    func(proto.Message) ([]string, [][]byte, string) // services, files, error message
}

var reflectVersions = map[string]reflectVersion{
	"v1": {
		procedure: "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
		list: func() proto.Message {
			return &reflectv1.ServerReflectionRequest{MessageRequest: &reflectv1.ServerReflectionRequest_ListServices{}}
		},
		symbol: func(s string) proto.Message {
			return &reflectv1.ServerReflectionRequest{MessageRequest: &reflectv1.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: s}}
		},
		newResp: func() proto.Message { return new(reflectv1.ServerReflectionResponse) },
		answer: func(m proto.Message) ([]string, [][]byte, string) {
			r := m.(*reflectv1.ServerReflectionResponse)
			var names []string
			for _, s := range r.GetListServicesResponse().GetService() {
				names = append(names, s.GetName())
			}
			return names, r.GetFileDescriptorResponse().GetFileDescriptorProto(), r.GetErrorResponse().GetErrorMessage()
		},
	},
	"v1alpha": {
		procedure: "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
		list: func() proto.Message {
			return &reflectv1alpha.ServerReflectionRequest{MessageRequest: &reflectv1alpha.ServerReflectionRequest_ListServices{}}
		},
		symbol: func(s string) proto.Message {
			return &reflectv1alpha.ServerReflectionRequest{MessageRequest: &reflectv1alpha.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: s}}
		},
		newResp: func() proto.Message { return new(reflectv1alpha.ServerReflectionResponse) },
		answer: func(m proto.Message) ([]string, [][]byte, string) {
			r := m.(*reflectv1alpha.ServerReflectionResponse)
			var names []string
			for _, s := range r.GetListServicesResponse().GetService() {
				names = append(names, s.GetName())
			}
			return names, r.GetFileDescriptorResponse().GetFileDescriptorProto(), r.GetErrorResponse().GetErrorMessage()
		},
	},
}

func (v reflectVersion) spec() connect.Spec {
	return connect.Spec{Procedure: v.procedure, StreamType: connect.StreamTypeBidi}
}

// ask sends req on st and reads one answer.
func (v reflectVersion) ask(t *testing.T, st connect.ClientStream, req proto.Message) ([]string, [][]byte) {
	t.Helper()
	if err := st.Send(req); err != nil {
		t.Fatalf("send: %v", err)
	}
	resp := v.newResp()
	if err := st.Receive(resp); err != nil {
		t.Fatalf("receive: %v", err)
	}
	names, files, msg := v.answer(resp)
	if msg != "" {
		t.Fatalf("error response: %s", msg)
	}
	return names, files
}

// checkSelfContained builds the files of one answer with nothing else
// and finds want in them.
func checkSelfContained(t *testing.T, raw [][]byte, want string, wantDep string) {
	t.Helper()
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
	if wantDep != "" && !names[wantDep] {
		t.Fatalf("%s: answer holds %v, not %s", want, names, wantDep)
	}
	files, err := protodesc.NewFiles(set)
	if err != nil {
		t.Fatalf("%s: files of one answer do not resolve (%v): %v", want, names, err)
	}
	if _, err := files.FindDescriptorByName(protoreflect.FullName(want)); err != nil {
		t.Fatalf("%s not in the answer's files %v: %v", want, names, err)
	}
}

// TestReflectionOverConnect asks the gateway's server reflection (v1 and
// v1alpha) with connect-go's client over Connect and gRPC-Web, binary and
// JSON, on cleartext HTTP/2, with the default routing of h2c connections
// (by their first request) and with WithH2CToHTTP: list_services names
// the demo's services and reflection itself; file_containing_symbol
// answers, on the same stream and again after, with the file and its
// transitive dependencies (benchmark.proto for Hello; the synthesized
// files of Arith's Go types), enough to build the file alone.
func TestReflectionOverConnect(t *testing.T) {
	for _, h2cHTTP := range []bool{false, true} {
		t.Run(fmt.Sprintf("h2c-to-http=%v", h2cHTTP), func(t *testing.T) { testReflectionOverConnect(t, h2cHTTP) })
	}
}

func testReflectionOverConnect(t *testing.T, h2cHTTP bool) {
	srv := server.New(server.WithLogger(discard()))
	for _, r := range []any{&demo.Hello{}, demo.Arith{}} {
		if err := srv.Register(r); err != nil {
			t.Fatal(err)
		}
	}
	addr := serveGateway(t, gateway.New(srv, gateway.WithProtoPackage("fleet.demo"), gateway.WithH2CToHTTP(h2cHTTP), gateway.WithLogger(discard())))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for name, c := range connectClients(h2cClient(t), addr) {
		for vname, v := range reflectVersions {
			t.Run(name+"/"+vname, func(t *testing.T) {
				st, err := c.CallClientStream(ctx, v.spec())
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				names, _ := v.ask(t, st, v.list())
				for _, want := range []string{"fleet.demo.Hello", "fleet.demo.Arith", "grpc.reflection.v1.ServerReflection", "grpc.health.v1.Health"} {
					if !slices.Contains(names, want) {
						t.Fatalf("list_services: %q lacks %s", names, want)
					}
				}
				for range 2 {
					_, files := v.ask(t, st, v.symbol("fleet.demo.Hello"))
					checkSelfContained(t, files, "fleet.demo.Hello.Say", "benchmark.proto")
					_, files = v.ask(t, st, v.symbol("fleet.demo.Arith"))
					checkSelfContained(t, files, "fleet.demo.Arith.Add", "")
				}
				if err := st.CloseSend(); err != nil {
					t.Fatal(err)
				}
				if err := st.Receive(v.newResp()); !errors.Is(err, io.EOF) {
					t.Fatalf("after CloseSend: %v, want io.EOF", err)
				}
			})
		}
	}
}

// TestReflectionOverConnectHTTP1: reflection is a bidi stream, which
// Connect and gRPC-Web carry over HTTP/2 only; over HTTP/1.1 connect-go's
// handler answers 505 HTTP Version Not Supported and closes the
// connection, and connect-go's client reports that.
func TestReflectionOverConnectHTTP1(t *testing.T) {
	_, addr := start(t, nil)
	hc := httpClient(t)
	for _, ct := range []string{"application/connect+proto", "application/grpc-web+proto"} {
		req, err := http.NewRequest(http.MethodPost, "http://"+addr+reflectVersions["v1"].procedure, strings.NewReader(""))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", ct)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusHTTPVersionNotSupported || !resp.Close {
			t.Fatalf("%s over HTTP/1.1: %d (close %v), want 505 and Connection: close", ct, resp.StatusCode, resp.Close)
		}
	}
	for name, c := range connectClients(hc, addr) {
		v := reflectVersions["v1"]
		st, err := c.CallClientStream(context.Background(), v.spec())
		if err == nil {
			// Send may fail first (the server closed the connection);
			// the call's own error is Receive's.
			_ = st.Send(v.list())
			err = st.Receive(v.newResp())
			st.Close()
		}
		// connect-go's client checks the HTTP version of the answer
		// (Connect) or reports its status (gRPC-Web).
		if err == nil || !strings.Contains(err.Error(), "HTTP/2") && !strings.Contains(err.Error(), "505") {
			t.Fatalf("%s over HTTP/1.1: %v, want an error about HTTP/2 or status 505", name, err)
		}
	}
}

// TestReflectionOverConnectAuth: with an auth function, reflection over
// Connect and gRPC-Web runs it first, as over gRPC: without the token the
// stream ends with its refusal (code and message) and no answer; with it
// reflection answers.
func TestReflectionOverConnectAuth(t *testing.T) {
	auth := server.WithAuth(func(_ context.Context, info *fleet.CallInfo, token string) error {
		if token != "Bearer good" {
			return fleet.Errorf(fleet.Unauthenticated, "bad token for %s/%s", info.Service, info.Method)
		}
		return nil
	})
	_, addr := start(t, []server.Option{auth})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for name, c := range connectClients(h2cClient(t), addr) {
		for vname, v := range reflectVersions {
			t.Run(name+"/"+vname, func(t *testing.T) {
				st, err := c.CallClientStream(ctx, v.spec())
				if err != nil {
					t.Fatal(err)
				}
				err = st.Send(v.list())
				if err == nil || errors.Is(err, io.EOF) {
					err = st.Receive(v.newResp())
				}
				st.Close()
				svc, method, _ := strings.Cut(strings.TrimPrefix(v.procedure, "/"), "/")
				var ce *connect.Error
				if !errors.As(err, &ce) || ce.Code() != connect.CodeUnauthenticated || ce.Message() != "bad token for "+svc+"/"+method {
					t.Fatalf("without token: %v", err)
				}

				actx, info := connect.NewClientContext(ctx)
				info.RequestHeader().Set("Authorization", "Bearer good")
				st, err = c.CallClientStream(actx, v.spec())
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				names, _ := v.ask(t, st, v.list())
				if !slices.Contains(names, "Hello") {
					t.Fatalf("with token: list_services %q lacks Hello", names)
				}
			})
		}
	}
}
