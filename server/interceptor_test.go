package server_test

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/internal/testutil"
	"github.com/fleetrpc/fleet/server"
)

type ctxTag struct{}

// TestServerInterceptorChainOrder: interceptors run in the order added,
// the first outermost, around two-way and oneway calls alike; each sees
// the call's info, values an outer one put on the context, and the
// handler's result; one may reject a call without running the handler.
func TestServerInterceptorChainOrder(t *testing.T) {
	var mu sync.Mutex
	var log []string
	rec := func(s string) { mu.Lock(); log = append(log, s); mu.Unlock() }
	take := func() []string { mu.Lock(); defer mu.Unlock(); got := log; log = nil; return got }
	mk := func(name string) server.Interceptor {
		return around(func(ctx context.Context, info *fleet.CallInfo, args, reply any, next server.UnaryFunc) error {
			tag, _ := ctx.Value(ctxTag{}).(string)
			rec(fmt.Sprintf("%s>%s.%s oneway=%v tag=%s", name, info.Service, info.Method, info.Oneway, tag))
			if info.Method == "Reject" && name == "B" {
				return fleet.NewError(fleet.PermissionDenied, "rejected by B")
			}
			err := next(context.WithValue(ctx, ctxTag{}, tag+name), info, args, reply)
			rec(fmt.Sprintf("%s<%v", name, fleet.CodeOf(err)))
			return err
		})
	}
	done := make(chan struct{}, 1)
	srv := server.New(server.WithInterceptor(mk("A"), mk("B")), server.WithInterceptor(mk("C")))
	handler := func(ctx context.Context, in *Msg, out *Msg) error {
		tag, _ := ctx.Value(ctxTag{}).(string)
		rec("handler tag=" + tag)
		out.S = in.S
		if fleet.CallInfoFrom(ctx).Oneway {
			done <- struct{}{}
		}
		return nil
	}
	srv.RegisterFunction("S", "Echo", handler)
	srv.RegisterFunction("S", "Note", handler)
	srv.RegisterFunction("S", "Reject", handler)
	addr := testutil.Serve(t, srv)
	c := dial(t, addr)

	tests := []struct {
		name string
		run  func() error
		want []string
	}{
		{"two-way", func() error { return c.Call(context.Background(), "S", "Echo", &Msg{S: "x"}, &Msg{}) },
			[]string{"A>S.Echo oneway=false tag=", "B>S.Echo oneway=false tag=A", "C>S.Echo oneway=false tag=AB", "handler tag=ABC", "C<ok", "B<ok", "A<ok"}},
		{"oneway", func() error {
			if err := c.Send(context.Background(), "S", "Note", &Msg{S: "y"}); err != nil {
				return err
			}
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				return fmt.Errorf("oneway handler never ran")
			}
			// The handler signalled before returning: wait for the chain to unwind.
			deadline := time.Now().Add(20 * time.Second)
			for time.Now().Before(deadline) {
				mu.Lock()
				n := len(log)
				mu.Unlock()
				if n >= 7 {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			return nil
		}, []string{"A>S.Note oneway=true tag=", "B>S.Note oneway=true tag=A", "C>S.Note oneway=true tag=AB", "handler tag=ABC", "C<ok", "B<ok", "A<ok"}},
		{"rejected", func() error {
			err := c.Call(context.Background(), "S", "Reject", &Msg{}, &Msg{})
			if fleet.CodeOf(err) != fleet.PermissionDenied {
				return fmt.Errorf("Reject = %v, want permission_denied", err)
			}
			return nil
		}, []string{"A>S.Reject oneway=false tag=", "B>S.Reject oneway=false tag=A", "A<permission_denied"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			take()
			if err := tt.run(); err != nil {
				t.Fatal(err)
			}
			if got := take(); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("chain ran\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

// around adapts a function that runs around next to a unary-only
// Interceptor.
func around(f func(ctx context.Context, info *fleet.CallInfo, args, reply any, next server.UnaryFunc) error) server.Interceptor {
	return server.UnaryInterceptorFunc(func(next server.UnaryFunc) server.UnaryFunc {
		return func(ctx context.Context, info *fleet.CallInfo, args, reply any) error {
			return f(ctx, info, args, reply, next)
		}
	})
}

type tenantKey struct{}

// TestInterceptorReplacesContext: an interceptor may pass on a context not
// derived from the call's (the chain is the method's own, built at
// registration; nothing is looked up in the context): the handler runs
// with it, for a method registered by Register (called through package
// reflect), by RegisterFunction and by Handle, and on the native and the
// Invoke routes.
func TestInterceptorReplacesContext(t *testing.T) {
	srv := server.New(server.WithInterceptor(around(func(ctx context.Context, info *fleet.CallInfo, args, reply any, next server.UnaryFunc) error {
		return next(context.WithValue(context.Background(), tenantKey{}, "t1"), info, args, reply)
	})))
	echo := func(ctx context.Context, in *Msg, out *Msg) error {
		tenant, _ := ctx.Value(tenantKey{}).(string)
		out.S = in.S + "/" + tenant
		return nil
	}
	if err := srv.RegisterFunction("F", "Echo", echo); err != nil {
		t.Fatal(err)
	}
	if err := server.Handle(srv, "H", "Echo", echo); err != nil {
		t.Fatal(err)
	}
	if err := srv.RegisterName("R", &ctxEcho{}); err != nil {
		t.Fatal(err)
	}
	c := dial(t, testutil.Serve(t, srv))
	for _, svc := range []string{"F", "H", "R"} {
		var out Msg
		if err := c.Call(context.Background(), svc, "Echo", &Msg{S: "x"}, &out); err != nil || out.S != "x/t1" {
			t.Fatalf("%s.Echo native = %q, %v; want x/t1", svc, out.S, err)
		}
		reply, _, err := srv.Invoke(context.Background(), &server.Call{Service: svc, Method: "Echo", Codec: codec.JSONCodec{}, Payload: []byte(`{"S":"y"}`)})
		if err != nil || string(reply) != `{"S":"y/t1"}` {
			t.Fatalf("%s.Echo Invoke = %s, %v; want y/t1", svc, reply, err)
		}
	}
}

type ctxEcho struct{}

func (*ctxEcho) Echo(ctx context.Context, in *Msg, out *Msg) error {
	tenant, _ := ctx.Value(tenantKey{}).(string)
	out.S = in.S + "/" + tenant
	return nil
}

// msgCounter is an Interceptor that counts, per stream, the messages the
// handler sent and received, by wrapping the Stream it passes on; unary
// calls it counts by route.
type msgCounter struct {
	mu     sync.Mutex
	ends   []string // "route kind service.method sent=N recv=M code"
	unary  []string // "route service.method"
	tenant string   // put on the stream handler's context
}

func (m *msgCounter) WrapUnary(next server.UnaryFunc) server.UnaryFunc {
	return func(ctx context.Context, info *fleet.CallInfo, args, reply any) error {
		m.mu.Lock()
		m.unary = append(m.unary, fmt.Sprintf("%s %s.%s", info.Route, info.Service, info.Method))
		m.mu.Unlock()
		return next(ctx, info, args, reply)
	}
}

type countingStream struct {
	server.Stream
	sent, recv atomic.Int64
}

func (s *countingStream) Send(msg any) error {
	err := s.Stream.Send(msg)
	if err == nil {
		s.sent.Add(1)
	}
	return err
}

func (s *countingStream) Receive(msg any) error {
	err := s.Stream.Receive(msg)
	if err == nil {
		s.recv.Add(1)
	}
	return err
}

func (m *msgCounter) WrapStream(next server.StreamFunc) server.StreamFunc {
	return func(ctx context.Context, info *fleet.CallInfo, st server.Stream) error {
		cs := &countingStream{Stream: st}
		err := next(context.WithValue(context.Background(), tenantKey{}, m.tenant), info, cs)
		m.mu.Lock()
		m.ends = append(m.ends, fmt.Sprintf("%s %s %s.%s sent=%d recv=%d %v", info.Route, st.Kind(), info.Service, info.Method, cs.sent.Load(), cs.recv.Load(), fleet.CodeOf(err)))
		m.mu.Unlock()
		return err
	}
}

func (m *msgCounter) take() (unary, ends []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	unary, ends = m.unary, m.ends
	m.unary, m.ends = nil, nil
	return unary, ends
}

// TestStreamInterceptorSeesMessages: one Interceptor sees every message a
// stream handler sends and receives, for the three kinds, on the native
// route (a real client) and through InvokeStream with a gateway's route;
// the context it passes on (here not derived from the stream's) reaches
// the handler; unary calls go through its WrapUnary, labelled by route.
func TestStreamInterceptorSeesMessages(t *testing.T) {
	mc := &msgCounter{tenant: "t9"}
	srv := server.New(server.WithInterceptor(mc))
	if err := srv.RegisterStreams("U", upperStreams{}); err != nil {
		t.Fatal(err)
	}
	if err := server.HandleBidiStream(srv, "T", "Tenant", func(ctx context.Context, st *server.BidiStream[Msg, Msg]) error {
		tenant, _ := ctx.Value(tenantKey{}).(string)
		return st.Send(&Msg{S: tenant})
	}); err != nil {
		t.Fatal(err)
	}
	srv.RegisterFunction("S", "Echo", func(ctx context.Context, in *Msg, out *Msg) error { out.S = in.S; return nil })
	c := dial(t, testutil.Serve(t, srv))
	ctx := context.Background()

	// Native: server stream (1 in, 3 out), client stream (3 in, 1 out),
	// bidi (2 in, 2 out), and a unary call.
	ss, err := client.CallServerStream[Msg, Msg](ctx, c, "U", "List", &Msg{S: "abc"})
	if err != nil {
		t.Fatal(err)
	}
	for ss.Receive() {
	}
	if err := ss.Err(); err != nil {
		t.Fatal(err)
	}
	cs, err := client.CallClientStream[Msg, Msg](ctx, c, "U", "Join")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"a", "b", "c"} {
		if err := cs.Send(&Msg{S: s}); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := cs.CloseAndReceive(); err != nil || res.S != "abc" {
		t.Fatalf("Join = %v, %v", res, err)
	}
	bs, err := client.CallBidiStream[Msg, Msg](ctx, c, "U", "Up")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"x", "y"} {
		if err := bs.Send(&Msg{S: s}); err != nil {
			t.Fatal(err)
		}
		if _, err := bs.Receive(); err != nil {
			t.Fatal(err)
		}
	}
	if err := bs.CloseRequest(); err != nil {
		t.Fatal(err)
	}
	if _, err := bs.Receive(); err != io.EOF {
		t.Fatalf("bidi end = %v, want io.EOF", err)
	}
	tb, err := client.CallBidiStream[Msg, Msg](ctx, c, "T", "Tenant")
	if err != nil {
		t.Fatal(err)
	}
	if m, err := tb.Receive(); err != nil || m.S != "t9" {
		t.Fatalf("handler's context: tenant %v, %v; want t9", m, err)
	}
	for {
		if _, err := tb.Receive(); err != nil {
			break
		}
	}
	if err := c.Call(ctx, "S", "Echo", &Msg{S: "u"}, &Msg{}); err != nil {
		t.Fatal(err)
	}
	// The stream's end frame is sent after the interceptor returned:
	// every record is in.
	unary, ends := mc.take()
	wantEnds := []string{
		"native server U.List sent=3 recv=1 ok",
		"native client U.Join sent=1 recv=3 ok",
		"native bidi U.Up sent=2 recv=2 ok",
		"native bidi T.Tenant sent=1 recv=0 ok",
	}
	if fmt.Sprint(ends) != fmt.Sprint(wantEnds) {
		t.Fatalf("native streams recorded\n%q\nwant\n%q", ends, wantEnds)
	}
	if want := []string{"native S.Echo"}; fmt.Sprint(unary) != fmt.Sprint(want) {
		t.Fatalf("native unary recorded %q, want %q", unary, want)
	}

	// InvokeStream and Invoke, as the gateway calls them.
	m := &memStream{in: jsonMsgs(t, "p", "q")}
	call := m.call("U", "Join", nil)
	call.Route = fleet.RouteGRPC
	if _, err := srv.InvokeStream(ctx, call); err != nil {
		t.Fatal(err)
	}
	if _, _, err := srv.Invoke(ctx, &server.Call{Service: "S", Method: "Echo", Codec: codec.JSONCodec{}, Payload: []byte(`{}`), Route: fleet.RouteJSONRPC}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := srv.Invoke(ctx, &server.Call{Service: "S", Method: "Echo", Codec: codec.JSONCodec{}, Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	unary, ends = mc.take()
	if want := []string{"grpc client U.Join sent=1 recv=2 ok"}; fmt.Sprint(ends) != fmt.Sprint(want) {
		t.Fatalf("InvokeStream recorded %q, want %q", ends, want)
	}
	if want := []string{"jsonrpc S.Echo", "inprocess S.Echo"}; fmt.Sprint(unary) != fmt.Sprint(want) {
		t.Fatalf("Invoke recorded %q, want %q", unary, want)
	}
}

// TestStreamInterceptorRejects: a stream interceptor that returns without
// calling next refuses the stream with its error; the handler never runs.
func TestStreamInterceptorRejects(t *testing.T) {
	var ran atomic.Bool
	srv := server.New(server.WithInterceptor(server.StreamInterceptorFunc(func(next server.StreamFunc) server.StreamFunc {
		return func(ctx context.Context, info *fleet.CallInfo, st server.Stream) error {
			if v, _ := info.MetadataValue("role"); v != "admin" {
				return fleet.NewError(fleet.PermissionDenied, "admins only")
			}
			return next(ctx, info, st)
		}
	})))
	if err := server.HandleBidiStream(srv, "A", "B", func(ctx context.Context, st *server.BidiStream[Msg, Msg]) error {
		ran.Store(true)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	c := dial(t, testutil.Serve(t, srv))
	bs, err := client.CallBidiStream[Msg, Msg](context.Background(), c, "A", "B")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bs.Receive(); fleet.CodeOf(err) != fleet.PermissionDenied {
		t.Fatalf("Receive = %v, want permission_denied", err)
	}
	ctx := fleet.WithOutgoingMetadata(context.Background(), fleet.Metadata{"role": "admin"})
	bs, err = client.CallBidiStream[Msg, Msg](ctx, c, "A", "B")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bs.Receive(); err != io.EOF {
		t.Fatalf("admin's Receive = %v, want io.EOF", err)
	}
	if !ran.Load() {
		t.Fatal("the admin's stream did not run the handler")
	}
}
