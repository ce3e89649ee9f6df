package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/rpc"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/compress"
	"github.com/fleetrpc/fleet/internal/benchpb"
	"github.com/fleetrpc/fleet/internal/testutil"
	"github.com/fleetrpc/fleet/server"
	"google.golang.org/protobuf/proto"
)

// Arith is written for net/rpc, unchanged.
type Args struct{ A, B int }
type Quotient struct{ Quo, Rem int }
type Arith int

func (t *Arith) Multiply(args *Args, reply *int) error {
	*reply = args.A * args.B
	return nil
}

func (t *Arith) Divide(args *Args, quo *Quotient) error {
	if args.B == 0 {
		return errors.New("divide by zero")
	}
	quo.Quo, quo.Rem = args.A/args.B, args.A%args.B
	return nil
}

// Svc exercises the context form.
type Svc struct {
	oneway   chan string
	ran      atomic.Int64
	deadline chan time.Duration // handler ctx done, relative to its deadline
	started  chan struct{}
}

type Msg struct{ S string }

func (s *Svc) Echo(ctx context.Context, in *Msg, out *Msg) error {
	s.ran.Add(1)
	out.S = in.S
	return nil
}

func (s *Svc) Sleep(ctx context.Context, d *time.Duration, out *string) error {
	time.Sleep(*d)
	*out = d.String()
	return nil
}

func (s *Svc) Note(ctx context.Context, in *Msg, _ *struct{}) error {
	s.oneway <- in.S
	return nil
}

func (s *Svc) Panic(ctx context.Context, in *Msg, out *Msg) error { panic("boom: " + in.S) }

func (s *Svc) Block(ctx context.Context, in *Msg, out *Msg) error {
	if s.started != nil {
		s.started <- struct{}{}
	}
	<-ctx.Done()
	if dl, ok := ctx.Deadline(); ok && s.deadline != nil {
		s.deadline <- time.Since(dl)
	}
	return ctx.Err()
}

func (s *Svc) Meta(ctx context.Context, in *Msg, out *Msg) error {
	md := fleet.IncomingMetadata(ctx)
	out.S = md["k"] + "|" + fleet.PeerAddr(ctx).Network()
	fleet.SetResponseMetadata(ctx, "back", "v-"+md["k"])
	return nil
}

func (s *Svc) Fail(ctx context.Context, in *Msg, out *Msg) error {
	return fleet.NewError(fleet.PermissionDenied, "not you: "+in.S)
}

type Hello struct{}

func (Hello) Say(ctx context.Context, in *benchpb.BenchmarkMessage, out *benchpb.BenchmarkMessage) error {
	proto.Merge(out, in)
	out.Field1 = proto.String("OK")
	out.Field2 = proto.Int32(100)
	return nil
}

func newServer(t testing.TB, opts ...server.Option) (*server.Server, *Svc, string) {
	t.Helper()
	srv := server.New(opts...)
	svc := &Svc{oneway: make(chan string, 16)}
	if err := srv.RegisterName("Svc", svc); err != nil {
		t.Fatal(err)
	}
	if err := srv.Register(new(Arith)); err != nil {
		t.Fatal(err)
	}
	if err := srv.RegisterName("Hello", &Hello{}); err != nil {
		t.Fatal(err)
	}
	return srv, svc, testutil.Serve(t, srv)
}

func dial(t testing.TB, addr string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.Dial(context.Background(), "tcp", addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestCallStyles(t *testing.T) {
	_, svc, addr := newServer(t)
	c := dial(t, addr)
	ctx := context.Background()

	var out Msg
	if err := c.Call(ctx, "Svc", "Echo", &Msg{"sync"}, &out); err != nil || out.S != "sync" {
		t.Fatalf("Call: %v %q", err, out.S)
	}

	var out2 Msg
	call := c.Go(ctx, "Svc", "Echo", &Msg{"async"}, &out2, nil)
	select {
	case done := <-call.Done:
		if done.Error != nil || out2.S != "async" {
			t.Fatalf("Go: %v %q", done.Error, out2.S)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Go never completed")
	}

	if err := c.Send(ctx, "Svc", "Note", &Msg{"oneway"}); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-svc.oneway:
		if s != "oneway" {
			t.Fatalf("oneway got %q", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("oneway call never ran")
	}
	if n := c.Pending(); n != 0 {
		t.Fatalf("%d calls still pending", n)
	}
}

func TestNetRPCServiceUnchanged(t *testing.T) {
	// The same type registers with net/rpc and with Fleet.
	if err := rpc.NewServer().Register(new(Arith)); err != nil {
		t.Fatal(err)
	}
	_, _, addr := newServer(t)
	c := dial(t, addr)
	var prod int
	if err := c.Call(context.Background(), "Arith", "Multiply", &Args{7, 8}, &prod); err != nil || prod != 56 {
		t.Fatalf("Multiply: %v %d", err, prod)
	}
	var q Quotient
	if err := c.Call(context.Background(), "Arith", "Divide", &Args{17, 5}, &q); err != nil || q != (Quotient{3, 2}) {
		t.Fatalf("Divide: %v %+v", err, q)
	}
	err := c.Call(context.Background(), "Arith", "Divide", &Args{1, 0}, &q)
	var fe *fleet.Error
	if !errors.As(err, &fe) || fe.Message() != "divide by zero" || fe.Code() != fleet.Unknown {
		t.Fatalf("handler error = %#v, want message %q intact", err, "divide by zero")
	}
}

func TestCodecsAndCompression(t *testing.T) {
	_, _, addr := newServer(t)
	type tc struct {
		name string
		cd   codec.ID
		args any
		rep  func() any
		chk  func(any) bool
	}
	plain := func() any { return &Msg{} }
	okPlain := func(v any) bool { return v.(*Msg).S == "héllo" }
	codecs := []tc{
		{"protobuf", codec.Protobuf, benchpb.New(), func() any { return &benchpb.BenchmarkMessage{} },
			func(v any) bool {
				m := v.(*benchpb.BenchmarkMessage)
				return m.GetField1() == "OK" && m.GetField2() == 100
			}},
		{"json", codec.JSON, &Msg{"héllo"}, plain, okPlain},
		{"msgpack", codec.MsgPack, &Msg{"héllo"}, plain, okPlain},
		{"gob", codec.Gob, &Msg{"héllo"}, plain, okPlain},
	}
	comps := []compress.ID{compress.None, compress.Gzip, compress.Snappy, compress.Zstd}
	for _, cc := range codecs {
		for _, cp := range comps {
			t.Run(fmt.Sprintf("%s/%d", cc.name, cp), func(t *testing.T) {
				c := dial(t, addr, client.WithCodec(cc.cd), client.WithCompression(cp, 1))
				method := "Echo"
				svc := "Svc"
				if cc.cd == codec.Protobuf {
					svc, method = "Hello", "Say"
				}
				reply := cc.rep()
				if err := c.Call(context.Background(), svc, method, cc.args, reply); err != nil {
					t.Fatal(err)
				}
				if !cc.chk(reply) {
					t.Fatalf("reply %+v", reply)
				}
			})
		}
	}
	t.Run("raw", func(t *testing.T) {
		srv := server.New()
		srv.RegisterFunction("Raw", "Upper", func(ctx context.Context, in *[]byte, out *[]byte) error {
			*out = append([]byte("UP:"), *in...)
			return nil
		})
		c := dial(t, testutil.Serve(t, srv), client.WithCompression(compress.Zstd, 1))
		var out []byte
		if err := c.Call(context.Background(), "Raw", "Upper", []byte("x"), &out); err != nil || string(out) != "UP:x" {
			t.Fatalf("%v %q", err, out)
		}
	})
}

func TestSlowCallDoesNotDelayFastCall(t *testing.T) {
	_, _, addr := newServer(t)
	c := dial(t, addr)
	slowD, fastD := 300*time.Millisecond, time.Duration(0)
	var slowOut, fastOut string
	order := make(chan string, 2)
	slow := c.Go(context.Background(), "Svc", "Sleep", &slowD, &slowOut, nil)
	fast := c.Go(context.Background(), "Svc", "Sleep", &fastD, &fastOut, nil)
	for i := 0; i < 2; i++ {
		select {
		case <-slow.Done:
			order <- "slow"
		case <-fast.Done:
			order <- "fast"
		}
	}
	if first := <-order; first != "fast" {
		t.Fatalf("%s call returned first", first)
	}
	if slow.Error != nil || fast.Error != nil {
		t.Fatal(slow.Error, fast.Error)
	}
}

func TestDeadlineReachesHandler(t *testing.T) {
	_, svc, addr := newServer(t)
	svc.deadline = make(chan time.Duration, 1)
	c := dial(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	clientDeadline, _ := ctx.Deadline()
	err := c.Call(ctx, "Svc", "Block", &Msg{}, &Msg{})
	if fleet.CodeOf(err) != fleet.DeadlineExceeded {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	// Generous: the bound catches a call that waits for the handler, not
	// scheduling delays on a busy machine.
	if late := time.Since(clientDeadline); late > 5*time.Second {
		t.Errorf("Call returned %v after its deadline", late)
	}
	select {
	case <-svc.deadline:
	case <-time.After(2 * time.Second):
		t.Fatal("handler ctx never done")
	}
}

// TestHandlerContextDoneAfterClientDeadline: the handler's context ends
// by the deadline the client sent (DeadlineExceeded, not a cancellation),
// and that deadline is the client's, within transit time (the bound is
// generous: it catches a lost or mis-scaled timeout, not scheduling).
func TestHandlerContextDoneAfterClientDeadline(t *testing.T) {
	type seen struct {
		err      error
		deadline time.Time
		ok       bool
	}
	done := make(chan seen, 1)
	srvDone := func(ctx context.Context, in *Msg, out *Msg) error {
		<-ctx.Done()
		dl, ok := ctx.Deadline()
		done <- seen{ctx.Err(), dl, ok}
		return nil
	}
	srv := server.New()
	srv.RegisterFunction("F", "Wait", srvDone)
	c := dial(t, testutil.Serve(t, srv))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	dl, _ := ctx.Deadline()
	_ = c.Call(ctx, "F", "Wait", &Msg{}, &Msg{})
	select {
	case got := <-done:
		if !got.ok || got.err != context.DeadlineExceeded {
			t.Fatalf("handler ctx: deadline set %v, err %v; want a deadline and DeadlineExceeded", got.ok, got.err)
		}
		if d := got.deadline.Sub(dl); d > 5*time.Second {
			t.Fatalf("handler deadline %v after the client's", d)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("handler ctx never done")
	}
}

func TestCancel(t *testing.T) {
	_, svc, addr := newServer(t)
	svc.started = make(chan struct{}, 1)
	c := dial(t, addr)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- c.Call(ctx, "Svc", "Block", &Msg{}, &Msg{}) }()
	<-svc.started
	cancel()
	select {
	case err := <-errc:
		if fleet.CodeOf(err) != fleet.Canceled || !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want Canceled", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("cancelled call did not return")
	}
	if n := c.Pending(); n != 0 {
		t.Fatalf("cancelled call still holds a pending slot (%d)", n)
	}
	// Async form.
	ctx2, cancel2 := context.WithCancel(context.Background())
	call := c.Go(ctx2, "Svc", "Block", &Msg{}, &Msg{}, nil)
	<-svc.started
	cancel2()
	select {
	case <-call.Done:
		if fleet.CodeOf(call.Error) != fleet.Canceled {
			t.Fatalf("async err = %v", call.Error)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("cancelled async call did not complete")
	}
	if n := c.Pending(); n != 0 {
		t.Fatalf("cancelled async call still pending (%d)", n)
	}
	// The connection still works.
	if err := c.Call(context.Background(), "Svc", "Echo", &Msg{"x"}, &Msg{}); err != nil {
		t.Fatal(err)
	}
}

func TestNotFound(t *testing.T) {
	_, _, addr := newServer(t)
	c := dial(t, addr)
	for _, sm := range [][2]string{{"Nope", "Echo"}, {"Svc", "Nope"}, {"Svc", "echo"}} {
		err := c.Call(context.Background(), sm[0], sm[1], &Msg{}, &Msg{})
		if fleet.CodeOf(err) != fleet.NotFound {
			t.Errorf("%s.%s: err = %v, want NotFound", sm[0], sm[1], err)
		}
	}
}

func TestErrorCodesTravel(t *testing.T) {
	_, _, addr := newServer(t)
	c := dial(t, addr)
	err := c.Call(context.Background(), "Svc", "Fail", &Msg{"bob"}, &Msg{})
	if !errors.Is(err, fleet.NewError(fleet.PermissionDenied, "")) {
		t.Fatalf("err = %v", err)
	}
	var fe *fleet.Error
	if !errors.As(err, &fe) || fe.Message() != "not you: bob" {
		t.Fatalf("message = %v", err)
	}
}

func TestPanicBecomesInternal(t *testing.T) {
	_, _, addr := newServer(t, server.WithLogger(discardLogger()))
	c := dial(t, addr)
	err := c.Call(context.Background(), "Svc", "Panic", &Msg{"x"}, &Msg{})
	if fleet.CodeOf(err) != fleet.Internal {
		t.Fatalf("err = %v, want Internal", err)
	}
	var out Msg
	if err := c.Call(context.Background(), "Svc", "Echo", &Msg{"after"}, &out); err != nil || out.S != "after" {
		t.Fatalf("after panic: %v", err)
	}
}

func TestMetadataBothWays(t *testing.T) {
	_, _, addr := newServer(t)
	c := dial(t, addr)
	var back fleet.Metadata
	ctx := fleet.WithOutgoingMetadata(context.Background(), fleet.Metadata{"k": "v1"})
	ctx = fleet.WithResponseMetadata(ctx, &back)
	var out Msg
	if err := c.Call(ctx, "Svc", "Meta", &Msg{}, &out); err != nil {
		t.Fatal(err)
	}
	if out.S != "v1|tcp" || back["back"] != "v-v1" {
		t.Fatalf("handler saw %q, client got back %v", out.S, back)
	}
}

// TestAppendedMetadataAndAuthToken sends metadata attached as a map, then
// appended pairs (one overriding the map), from a client with an auth
// token: the handler sees the merged metadata, later pairs winning, and
// the token; a token appended by the caller wins over the client's.
func TestAppendedMetadataAndAuthToken(t *testing.T) {
	var tokens []string
	var mu sync.Mutex
	srv := server.New(server.WithAuth(func(ctx context.Context, info *fleet.CallInfo, token string) error {
		mu.Lock()
		tokens = append(tokens, token)
		mu.Unlock()
		return nil
	}))
	var seen fleet.Metadata
	srv.RegisterFunction("M", "Do", func(ctx context.Context, in *Msg, out *Msg) error {
		seen = fleet.IncomingMetadata(ctx).Clone()
		return nil
	})
	c := dial(t, testutil.Serve(t, srv), client.WithAuthToken("client-token"))
	ctx := fleet.WithOutgoingMetadata(context.Background(), fleet.Metadata{"a": "map", "b": "map"})
	ctx = fleet.AppendOutgoingMetadata(ctx, "b", "pair", "c", "pair")
	if err := c.Call(ctx, "M", "Do", &Msg{}, &Msg{}); err != nil {
		t.Fatal(err)
	}
	want := fleet.Metadata{"a": "map", "b": "pair", "c": "pair", fleet.AuthKey: "client-token"}
	if !maps.Equal(seen, want) {
		t.Fatalf("handler saw %q, want %q", seen, want)
	}
	ctx = fleet.AppendOutgoingMetadata(ctx, fleet.AuthKey, "caller-token")
	if err := c.Call(ctx, "M", "Do", &Msg{}, &Msg{}); err != nil {
		t.Fatal(err)
	}
	if seen[fleet.AuthKey] != "caller-token" || seen["b"] != "pair" {
		t.Fatalf("handler saw %q, want the caller's token and b=pair", seen)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(tokens, []string{"client-token", "caller-token"}) {
		t.Fatalf("auth saw tokens %q", tokens)
	}
}

func TestAuthRejectsBeforeHandler(t *testing.T) {
	var ran atomic.Int64
	srv := server.New(server.WithAuth(func(ctx context.Context, info *fleet.CallInfo, token string) error {
		if token != "s3cret" {
			return errors.New("bad token")
		}
		return nil
	}))
	srv.RegisterFunction("A", "Do", func(ctx context.Context, in *Msg, out *Msg) error {
		ran.Add(1)
		return nil
	})
	addr := testutil.Serve(t, srv)
	for _, tok := range []string{"", "wrong"} {
		c := dial(t, addr, client.WithAuthToken(tok))
		err := c.Call(context.Background(), "A", "Do", &Msg{}, &Msg{})
		if fleet.CodeOf(err) != fleet.Unauthenticated {
			t.Fatalf("token %q: err = %v, want Unauthenticated", tok, err)
		}
	}
	if ran.Load() != 0 {
		t.Fatal("handler ran for an unauthenticated call")
	}
	c := dial(t, addr, client.WithAuthToken("s3cret"))
	if err := c.Call(context.Background(), "A", "Do", &Msg{}, &Msg{}); err != nil || ran.Load() != 1 {
		t.Fatalf("authenticated call: %v (ran %d)", err, ran.Load())
	}
}

func TestInterceptorsAndHooks(t *testing.T) {
	var order []string
	var mu sync.Mutex
	rec := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	hk := &hookRec{rec: rec}
	srv := server.New(server.WithPlugin(hk), server.WithInterceptor(around(func(ctx context.Context, info *fleet.CallInfo, args, reply any, next server.UnaryFunc) error {
		rec("server-interceptor:" + info.Method)
		return next(ctx, info, args, reply)
	})))
	srv.RegisterFunction("H", "Do", func(ctx context.Context, in *Msg, out *Msg) error { rec("handler"); return nil })
	addr := testutil.Serve(t, srv)
	c := dial(t, addr, client.WithInterceptor(client.UnaryInterceptorFunc(func(next client.Invoker) client.Invoker {
		return func(ctx context.Context, s, m string, args, reply any) error {
			rec("client-interceptor")
			return next(ctx, s, m, args, reply)
		}
	})))
	if err := c.Call(context.Background(), "H", "Do", &Msg{}, &Msg{}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	deadline := time.Now().Add(2 * time.Second)
	for {
		mu.Lock()
		n := len(order)
		mu.Unlock()
		if n >= 6 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"register:H", "client-interceptor", "accept", "server-interceptor:Do", "handler", "close"}
	// accept may be recorded before or after the client interceptor.
	if len(order) != len(want) {
		t.Fatalf("hooks ran %v, want %v", order, want)
	}
	got := append([]string(nil), order...)
	if got[1] == "accept" {
		got[1], got[2] = got[2], got[1]
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("hooks ran %v, want %v", order, want)
		}
	}
}

type hookRec struct{ rec func(string) }

func (h *hookRec) OnRegister(s string, _ []string) error { h.rec("register:" + s); return nil }
func (h *hookRec) OnConnAccept(c net.Conn) (net.Conn, bool) {
	h.rec("accept")
	return c, true
}
func (h *hookRec) OnConnClose(net.Conn) { h.rec("close") }

// TestGarbageClosesOnlyThatConnection sends an HTTP request line, random
// bytes and a huge length prefix on separate connections: each is closed,
// nothing panics, and a client already connected keeps working throughout.
func TestGarbageClosesOnlyThatConnection(t *testing.T) {
	_, _, addr := newServer(t, server.WithLogger(discardLogger()))
	good := dial(t, addr)
	load := testutil.StartLoad(1, 0, func(int) error {
		var out Msg
		if err := good.Call(context.Background(), "Svc", "Echo", &Msg{"ok"}, &out); err != nil {
			return err
		}
		if out.S != "ok" {
			return fmt.Errorf("reply %q", out.S)
		}
		return nil
	})
	rnd := make([]byte, 4096)
	for i := range rnd {
		rnd[i] = byte(rand.IntN(256))
	}
	inputs := map[string][]byte{
		"http":        []byte("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"),
		"random":      rnd,
		"huge prefix": append([]byte{0xFF, 0xFF, 0xFF, 0xFF}, make([]byte, 16)...),
		"bad magic":   append([]byte{0, 0, 0, 30}, make([]byte, 30)...),
	}
	for name, in := range inputs {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		nc.Write(in)
		nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := io.Copy(io.Discard, nc)
		if err != nil {
			t.Errorf("%s: connection not closed by the server: %v", name, err)
		} else if n != 0 {
			t.Errorf("%s: server answered %d bytes to garbage", name, n)
		}
		nc.Close()
	}
	if ok, n, first := load.Stop(); n != 0 || ok == 0 {
		t.Fatalf("good client: %d calls ok, %d failed; first: %v", ok, n, first)
	}
}

func TestTransports(t *testing.T) {
	srvTLS, cliTLS := testutil.TLSConfigs(t)
	sock := filepath.Join(t.TempDir(), "fleet.sock")
	for _, tc := range []struct{ network, addr string }{
		{"tcp", "127.0.0.1:0"}, {"unix", sock}, {"tls", "127.0.0.1:0"},
	} {
		t.Run(tc.network, func(t *testing.T) {
			srv := server.New(server.WithTLS(srvTLS))
			srv.RegisterName("Svc", &Svc{})
			lis, err := srv.Listen(tc.network, tc.addr)
			if err != nil {
				t.Fatal(err)
			}
			go srv.Serve(lis)
			defer srv.Shutdown(context.Background())
			c, err := client.Dial(context.Background(), tc.network, lis.Addr().String(), client.WithTLS(tlsIf(tc.network == "tls", cliTLS)))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var out Msg
			if err := c.Call(context.Background(), "Svc", "Echo", &Msg{tc.network}, &out); err != nil || out.S != tc.network {
				t.Fatalf("%v %q", err, out.S)
			}
		})
	}
}

func TestBrokenConnectionFailsPendingCalls(t *testing.T) {
	srv, svc, addr := newServer(t)
	svc.started = make(chan struct{}, 8)
	c := dial(t, addr)
	const n = 5
	calls := make([]*client.Call, n)
	for i := range calls {
		calls[i] = c.Go(context.Background(), "Svc", "Block", &Msg{}, &Msg{}, nil)
	}
	for i := 0; i < n; i++ {
		<-svc.started
	}
	srv.Close()
	for _, call := range calls {
		select {
		case <-call.Done:
			if fleet.CodeOf(call.Error) != fleet.Unavailable || !errors.Is(call.Error, client.ErrConnectionLost) {
				t.Fatalf("err = %v, want Unavailable wrapping ErrConnectionLost", call.Error)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("pending call not failed after the connection broke")
		}
	}
	if err := c.Call(context.Background(), "Svc", "Echo", &Msg{}, &Msg{}); !errors.Is(err, client.ErrNotSent) {
		t.Fatalf("call on a broken client: %v, want ErrNotSent", err)
	}
}

func TestHeartbeatDetectsSilentServer(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		nc, err := lis.Accept()
		if err == nil {
			accepted <- nc // reads nothing, answers nothing
		}
	}()
	c, err := client.Dial(context.Background(), "tcp", lis.Addr().String(), client.WithHeartbeat(30*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	nc := <-accepted
	defer nc.Close()
	call := c.Go(context.Background(), "Svc", "Echo", &Msg{}, &Msg{}, nil)
	select {
	case <-call.Done:
		if fleet.CodeOf(call.Error) != fleet.Unavailable {
			t.Fatalf("err = %v", call.Error)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("heartbeat never failed the silent connection")
	}
}

func TestMaxConcurrentPerConn(t *testing.T) {
	_, svc, addr := newServer(t, server.WithMaxConcurrentPerConn(2))
	svc.started = make(chan struct{}, 4)
	c := dial(t, addr)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.Go(ctx, "Svc", "Block", &Msg{}, &Msg{}, nil)
	c.Go(ctx, "Svc", "Block", &Msg{}, &Msg{}, nil)
	<-svc.started
	<-svc.started
	err := c.Call(context.Background(), "Svc", "Echo", &Msg{}, &Msg{})
	if fleet.CodeOf(err) != fleet.ResourceExhausted {
		t.Fatalf("third call: %v, want ResourceExhausted", err)
	}
}

func TestWorkerPool(t *testing.T) {
	_, _, addr := newServer(t, server.WithWorkerPool(4))
	c := dial(t, addr)
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out Msg
			if err := c.Call(context.Background(), "Svc", "Echo", &Msg{"w"}, &out); err != nil || out.S != "w" {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
}

func tlsIf[T any](ok bool, v *T) *T {
	if ok {
		return v
	}
	return nil
}
