package server_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/internal/benchpb"
	"github.com/fleetrpc/fleet/internal/demo"
	"github.com/fleetrpc/fleet/protocol"
	"github.com/fleetrpc/fleet/server"
	"google.golang.org/protobuf/proto"
)

// mdSvc echoes a request metadata key into the response metadata.
type mdSvc struct{}

func (mdSvc) Echo(ctx context.Context, in *Msg, out *Msg) error {
	fleet.SetResponseMetadata(ctx, "echo", fleet.IncomingMetadata(ctx)["k"])
	if _, ok := ctx.Deadline(); ok {
		fleet.SetResponseMetadata(ctx, "deadline", "yes")
	}
	if in.S == "fail" {
		return fleet.NewError(fleet.FailedPrecondition, "asked to fail")
	}
	if in.S == "plain" {
		return errors.New("plain error")
	}
	if in.S == "panic" {
		panic("boom")
	}
	out.S = in.S
	return nil
}

func TestInvoke(t *testing.T) {
	var icCalls, authCalls int
	var mu sync.Mutex
	srv := server.New(
		server.WithAuth(func(ctx context.Context, info *fleet.CallInfo, token string) error {
			mu.Lock()
			authCalls++
			mu.Unlock()
			if token != "secret" {
				return errors.New("bad token")
			}
			return nil
		}),
		server.WithInterceptor(around(func(ctx context.Context, info *fleet.CallInfo, args, reply any, next server.UnaryFunc) error {
			mu.Lock()
			icCalls++
			mu.Unlock()
			return next(ctx, info, args, reply)
		})),
		server.WithLimits(protocol.Limits{MaxDecompressedSize: 1 << 10}),
		server.WithLogger(discardLogger()),
	)
	if err := srv.RegisterName("Md", mdSvc{}); err != nil {
		t.Fatal(err)
	}
	if err := srv.Register(&demo.Hello{}); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	auth := fleet.Metadata{fleet.AuthKey: "secret", "k": "v"}
	js := codec.JSONCodec{}
	ctx := context.Background()

	tests := []struct {
		name, service, method, payload string
		md                             fleet.Metadata
		code                           fleet.Code
		msg                            string
		reply                          string
	}{
		{name: "ok", service: "Md", method: "Echo", payload: `{"S":"hi"}`, md: auth, reply: `{"S":"hi"}`},
		{name: "handler code", service: "Md", method: "Echo", payload: `{"S":"fail"}`, md: auth, code: fleet.FailedPrecondition, msg: "asked to fail"},
		{name: "plain error", service: "Md", method: "Echo", payload: `{"S":"plain"}`, md: auth, code: fleet.Unknown, msg: "plain error"},
		{name: "panic", service: "Md", method: "Echo", payload: `{"S":"panic"}`, md: auth, code: fleet.Internal, msg: "boom"},
		{name: "no token", service: "Md", method: "Echo", payload: `{"S":"hi"}`, code: fleet.Unauthenticated, msg: "bad token"},
		{name: "unknown service", service: "Nope", method: "Echo", payload: `{}`, md: auth, code: fleet.NotFound},
		{name: "unknown method", service: "Md", method: "Nope", payload: `{}`, md: auth, code: fleet.NotFound},
		{name: "bad payload", service: "Md", method: "Echo", payload: `{"S":`, md: auth, code: fleet.InvalidArgument},
		{name: "oversized", service: "Md", method: "Echo", payload: `{"S":"` + strings.Repeat("x", 2000) + `"}`, md: auth, code: fleet.ResourceExhausted},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reply, rmd, err := srv.Invoke(ctx, &server.Call{Service: tc.service, Method: tc.method, Codec: js, Payload: []byte(tc.payload), Metadata: tc.md})
			if got := fleet.CodeOf(err); got != tc.code {
				t.Fatalf("code %v, want %v (err %v)", got, tc.code, err)
			}
			var fe *fleet.Error
			if err != nil && !errors.As(err, &fe) {
				t.Fatalf("error %T is not a *fleet.Error", err)
			}
			if tc.msg != "" && !strings.Contains(fe.Message(), tc.msg) {
				t.Fatalf("message %q does not contain %q", fe.Message(), tc.msg)
			}
			if tc.code == fleet.OK {
				if string(reply) != tc.reply {
					t.Fatalf("reply %s, want %s", reply, tc.reply)
				}
				if rmd["echo"] != "v" {
					t.Fatalf("response metadata %v", rmd)
				}
			}
		})
	}
	mu.Lock()
	if authCalls == 0 || icCalls == 0 {
		t.Errorf("auth ran %d times, interceptor %d times", authCalls, icCalls)
	}
	mu.Unlock()

	// Deadline: ctx's deadline reaches the handler.
	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, rmd, err := srv.Invoke(dctx, &server.Call{Service: "Md", Method: "Echo", Codec: js, Payload: []byte(`{"S":"x"}`), Metadata: auth})
	if err != nil || rmd["deadline"] != "yes" {
		t.Fatalf("deadline not seen: %v %v", rmd, err)
	}

	// Protobuf: the payload is the wire encoding.
	in := benchpb.New()
	b, _ := proto.Marshal(in)
	reply, _, err := srv.Invoke(ctx, &server.Call{Service: "Hello", Method: "Say", Codec: codec.ProtobufCodec{}, Payload: b, Metadata: auth})
	if err != nil {
		t.Fatal(err)
	}
	var out benchpb.BenchmarkMessage
	if err := proto.Unmarshal(reply, &out); err != nil || out.GetField1() != "OK" {
		t.Fatalf("reply %v, %v", &out, err)
	}

	d, ok := srv.Method("Hello", "Say")
	if !ok || d.ArgType.Name() != "BenchmarkMessage" || d.ReplyType.Name() != "BenchmarkMessage" {
		t.Fatalf("Method: %+v %v", d, ok)
	}
	if _, ok := srv.Method("Hello", "Nope"); ok {
		t.Fatal("Method found an unknown method")
	}

	// After Close, calls are refused with ShuttingDown.
	srv.Close()
	if !srv.ShuttingDown() {
		t.Fatal("ShuttingDown false after Close")
	}
	_, _, err = srv.Invoke(ctx, &server.Call{Service: "Md", Method: "Echo", Codec: js, Payload: []byte(`{}`), Metadata: auth})
	if fleet.CodeOf(err) != fleet.ShuttingDown {
		t.Fatalf("after Close: %v", err)
	}
}

// TestServeConn hands accepted connections to ServeConn, as the gateway
// does, and calls through them with the native client.
func TestServeConn(t *testing.T) {
	srv := server.New(server.WithLogger(discardLogger()))
	if err := srv.Register(&demo.Arith{}); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := lis.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				srv.ServeConn(nc)
			}()
		}
	}()
	c, err := client.Dial(context.Background(), "tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	var sum int
	if err := c.Call(context.Background(), "Arith", "Add", &demo.Args{A: 2, B: 3}, &sum); err != nil || sum != 5 {
		t.Fatalf("sum %d, %v", sum, err)
	}
	c.Close()
	sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	lis.Close()
	wg.Wait()
}

// invokeHooks records the hook points Invoke passes through.
type invokeRec struct {
	mu  sync.Mutex
	got []string
}

func (h *invokeRec) add(s string) { h.mu.Lock(); h.got = append(h.got, s); h.mu.Unlock() }

func (h *invokeRec) WrapUnary(next server.UnaryFunc) server.UnaryFunc {
	return func(ctx context.Context, info *fleet.CallInfo, args, reply any) error {
		h.add("before " + info.Service + "." + info.Method + " " + string(info.Route))
		if info.Metadata()["deny"] != "" {
			return fleet.NewError(fleet.PermissionDenied, "denied by interceptor")
		}
		err := next(ctx, info, args, reply)
		h.add("after " + fleet.CodeOf(err).String())
		return err
	}
}

func (h *invokeRec) WrapStream(next server.StreamFunc) server.StreamFunc { return next }

// TestInvokeInterceptor: Invoke runs the method's interceptor chain, with
// the call's route in its info; an interceptor may refuse the call; a call
// over the metadata limits is refused before the chain.
func TestInvokeInterceptor(t *testing.T) {
	h := &invokeRec{}
	srv := server.New(server.WithInterceptor(h), server.WithLogger(discardLogger()))
	defer srv.Close()
	if err := srv.RegisterName("Md", mdSvc{}); err != nil {
		t.Fatal(err)
	}
	call := &server.Call{Service: "Md", Method: "Echo", Codec: codec.JSONCodec{}, Payload: []byte(`{"S":"a"}`), Route: fleet.RouteHTTP}
	if _, _, err := srv.Invoke(context.Background(), call); err != nil {
		t.Fatal(err)
	}
	want := []string{"before Md.Echo http", "after ok"}
	h.mu.Lock()
	got := append([]string(nil), h.got...)
	h.got = nil
	h.mu.Unlock()
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("interceptor saw %v, want %v", got, want)
	}
	call.Metadata = fleet.Metadata{"deny": "1"}
	if _, _, err := srv.Invoke(context.Background(), call); fleet.CodeOf(err) != fleet.PermissionDenied {
		t.Fatalf("denied call: %v", err)
	}
	// Metadata over the limit is refused before anything runs.
	big := fleet.Metadata{}
	for i := range 100 {
		big[strings.Repeat("k", i+1)] = "v"
	}
	call.Metadata = big
	if _, _, err := srv.Invoke(context.Background(), call); fleet.CodeOf(err) != fleet.ResourceExhausted {
		t.Fatalf("100 metadata pairs: %v", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if want := []string{"before Md.Echo http"}; strings.Join(h.got, "|") != strings.Join(want, "|") {
		t.Fatalf("after the denied and the oversized call, the interceptor saw %v, want %v", h.got, want)
	}
}
