package client_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/compress"
	"github.com/fleetrpc/fleet/server"
)

// The in-process tests run a real server and a client joined by
// client.InProcess; nothing of either is replaced.

type ipArgs struct {
	A, B int
	Pad  string
}

type ipReply struct {
	N    int
	Text string
}

// calc is the service of the in-process tests: Add adds, Wait blocks until
// its context ends or release is closed, Note records a oneway call.
type calc struct {
	calls   atomic.Int32
	started chan struct{} // Wait: one value per call, when it begins
	release chan struct{} // Wait: closed to let it return
	ended   chan error    // Wait: its context's error when it ends
	notes   chan int      // Note: the A of each oneway call
}

func newCalc() *calc {
	return &calc{started: make(chan struct{}, 8), release: make(chan struct{}), ended: make(chan error, 8), notes: make(chan int, 8)}
}

func (k *calc) register(t testing.TB, srv *server.Server) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(server.Handle(srv, "Calc", "Add", func(ctx context.Context, a *ipArgs, r *ipReply) error {
		k.calls.Add(1)
		r.N = a.A + a.B
		return nil
	}))
	must(server.Handle(srv, "Calc", "Deadline", func(ctx context.Context, a *ipArgs, r *ipReply) error {
		if dl, ok := ctx.Deadline(); ok {
			r.N = int(time.Until(dl) / time.Millisecond)
			r.Text = "deadline"
		}
		return nil
	}))
	must(server.Handle(srv, "Calc", "Wait", func(ctx context.Context, a *ipArgs, r *ipReply) error {
		k.started <- struct{}{}
		select {
		case <-ctx.Done():
			k.ended <- ctx.Err()
			return ctx.Err()
		case <-k.release:
			k.ended <- nil
			r.N = a.A
			return nil
		}
	}))
	must(server.Handle(srv, "Calc", "Note", func(ctx context.Context, a *ipArgs, _ *struct{}) error {
		k.notes <- a.A
		return nil
	}))
	must(server.Handle(srv, "Calc", "Meta", func(ctx context.Context, a *ipArgs, r *ipReply) error {
		r.Text = fleet.IncomingMetadata(ctx)["who"] + "@" + fleet.PeerAddr(ctx).String()
		fleet.SetResponseMetadata(ctx, "served-by", "calc")
		return nil
	}))
	must(server.Handle(srv, "Calc", "Echo", func(ctx context.Context, a *ipArgs, r *ipReply) error {
		r.Text = strings.Repeat("x", a.A)
		return nil
	}))
	must(server.HandleServerStream(srv, "Calc", "Count", func(ctx context.Context, a *ipArgs, st *server.ServerStream[ipReply]) error {
		for i := range a.A {
			if err := st.Send(&ipReply{N: i}); err != nil {
				return err
			}
		}
		st.ResponseTrailer()["counted"] = "yes"
		return nil
	}))
	must(server.HandleClientStream(srv, "Calc", "Sum", func(ctx context.Context, st *server.ClientStream[ipArgs]) (*ipReply, error) {
		var r ipReply
		for st.Receive() {
			r.N += st.Msg().A
		}
		return &r, st.Err()
	}))
	must(server.HandleBidiStream(srv, "Calc", "Double", func(ctx context.Context, st *server.BidiStream[ipArgs, ipReply]) error {
		for {
			a, err := st.Receive()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				k.ended <- err
				return err
			}
			if err := st.Send(&ipReply{N: 2 * a.A}); err != nil {
				return err
			}
		}
	}))
}

// startInProcess makes a server with sopts serving k's methods and an
// in-process client with copts; both are closed when the test ends.
func startInProcess(t *testing.T, k *calc, sopts []server.Option, copts ...client.Option) (*server.Server, *client.Client) {
	t.Helper()
	srv := server.New(sopts...)
	k.register(t, srv)
	c, err := client.InProcess(srv, copts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return srv, c
}

func wantCode(t *testing.T, what string, err error, code fleet.Code) {
	t.Helper()
	if fleet.CodeOf(err) != code {
		t.Fatalf("%s: %v (code %v), want code %v", what, err, fleet.CodeOf(err), code)
	}
}

func TestInProcessUnaryAndOneway(t *testing.T) {
	k := newCalc()
	_, c := startInProcess(t, k, nil)
	ctx := context.Background()
	var r ipReply
	if err := c.Call(ctx, "Calc", "Add", &ipArgs{A: 2, B: 3}, &r); err != nil || r.N != 5 {
		t.Fatalf("Add: %+v, %v; want N=5", r, err)
	}
	call := <-c.Go(ctx, "Calc", "Add", &ipArgs{A: 4, B: 5}, &r, nil).Done
	if call.Error != nil || r.N != 9 {
		t.Fatalf("Go Add: %+v, %v; want N=9", r, call.Error)
	}
	wantCode(t, "unknown method", c.Call(ctx, "Calc", "Nope", &ipArgs{}, &r), fleet.NotFound)

	if err := c.Send(ctx, "Calc", "Note", &ipArgs{A: 42}); err != nil {
		t.Fatal(err)
	}
	if got := <-k.notes; got != 42 {
		t.Fatalf("oneway Note ran with A=%d, want 42", got)
	}
	if a := c.RemoteAddr(); a.Network() != "inprocess" || a.String() != "inprocess" {
		t.Fatalf("RemoteAddr %s/%s, want inprocess/inprocess", a.Network(), a)
	}
}

// TestInProcessDeadlineAndCancel checks that the caller's deadline bounds
// the handler's context and that cancelling a call cancels the handler.
func TestInProcessDeadlineAndCancel(t *testing.T) {
	k := newCalc()
	_, c := startInProcess(t, k, nil)

	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	var r ipReply
	if err := c.Call(ctx, "Calc", "Deadline", &ipArgs{}, &r); err != nil {
		t.Fatal(err)
	}
	if r.Text != "deadline" || r.N <= 0 || r.N > int(time.Hour/time.Millisecond) {
		t.Fatalf("handler saw deadline %q, %d ms left; want one within the caller's hour", r.Text, r.N)
	}

	// A deadline that passes while the handler waits ends both sides.
	dctx, dcancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer dcancel()
	wantCode(t, "call past its deadline", c.Call(dctx, "Calc", "Wait", &ipArgs{}, &r), fleet.DeadlineExceeded)
	<-k.started
	if err := <-k.ended; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("handler's context ended with %v, want DeadlineExceeded", err)
	}

	cctx, ccancel := context.WithCancel(context.Background())
	call := c.Go(cctx, "Calc", "Wait", &ipArgs{}, &r, nil)
	<-k.started
	ccancel()
	<-call.Done
	wantCode(t, "cancelled call", call.Error, fleet.Canceled)
	if err := <-k.ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("handler's context ended with %v, want Canceled", err)
	}
}

func TestInProcessMetadata(t *testing.T) {
	k := newCalc()
	_, c := startInProcess(t, k, nil)
	var md fleet.Metadata
	ctx := fleet.WithResponseMetadata(fleet.AppendOutgoingMetadata(context.Background(), "who", "tester"), &md)
	var r ipReply
	if err := c.Call(ctx, "Calc", "Meta", &ipArgs{}, &r); err != nil {
		t.Fatal(err)
	}
	if r.Text != "tester@inprocess" {
		t.Fatalf("handler saw %q, want the request metadata and peer tester@inprocess", r.Text)
	}
	if md["served-by"] != "calc" {
		t.Fatalf("response metadata %v, want served-by=calc", md)
	}
}

// TestInProcessAuth checks that the server's auth runs for in-process
// calls and streams: no token and a wrong token are refused with
// Unauthenticated before the handler runs; the right token passes.
func TestInProcessAuth(t *testing.T) {
	auth := server.WithAuth(func(ctx context.Context, info *fleet.CallInfo, token string) error {
		if token != "s3cret" {
			return fleet.NewError(fleet.Unauthenticated, "bad token")
		}
		return nil
	})
	for _, tc := range []struct {
		name  string
		token []client.Option
		want  fleet.Code
	}{
		{"no token", nil, fleet.Unauthenticated},
		{"wrong token", []client.Option{client.WithAuthToken("guess")}, fleet.Unauthenticated},
		{"right token", []client.Option{client.WithAuthToken("s3cret")}, fleet.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newCalc()
			_, c := startInProcess(t, k, []server.Option{auth}, tc.token...)
			var r ipReply
			wantCode(t, "Add", c.Call(context.Background(), "Calc", "Add", &ipArgs{A: 1, B: 1}, &r), tc.want)
			if ran := k.calls.Load(); (ran == 1) != (tc.want == fleet.OK) {
				t.Fatalf("handler ran %d times; want it to run only with the right token", ran)
			}
			// A method that does not exist is refused for its token, not its name.
			if tc.want != fleet.OK {
				wantCode(t, "unknown method", c.Call(context.Background(), "Nope", "Nope", &ipArgs{}, &r), tc.want)
			}
			st, err := client.CallServerStream[ipArgs, ipReply](context.Background(), c, "Calc", "Count", &ipArgs{A: 2})
			if err == nil {
				for st.Receive() {
				}
				err = st.Err()
				st.Close()
			}
			wantCode(t, "stream", err, tc.want)
		})
	}
}

func TestInProcessRateLimit(t *testing.T) {
	k := newCalc()
	// One call's token, then none for a very long time.
	_, c := startInProcess(t, k, []server.Option{server.WithRateLimit(1e-6, 1)})
	var r ipReply
	if err := c.Call(context.Background(), "Calc", "Add", &ipArgs{A: 1}, &r); err != nil {
		t.Fatalf("first call: %v", err)
	}
	var md fleet.Metadata
	err := c.Call(fleet.WithResponseMetadata(context.Background(), &md), "Calc", "Add", &ipArgs{A: 1}, &r)
	wantCode(t, "call over the rate limit", err, fleet.ResourceExhausted)
	if n := k.calls.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want 1: the refused call must not run", n)
	}
	if _, ok := md[server.RetryAfterKey]; !ok {
		t.Fatalf("refusal's metadata %v has no %s", md, server.RetryAfterKey)
	}
}

// TestInProcessInterceptors checks that the client's and the server's
// interceptors, for calls and for streams, all run on in-process calls.
func TestInProcessInterceptors(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	note := func(s string) { mu.Lock(); seen = append(seen, s); mu.Unlock() }
	sopts := []server.Option{
		server.WithInterceptor(server.UnaryInterceptorFunc(func(next server.UnaryFunc) server.UnaryFunc {
			return func(ctx context.Context, info *fleet.CallInfo, args, reply any) error {
				note("server call " + info.Method)
				return next(ctx, info, args, reply)
			}
		})),
		server.WithInterceptor(server.StreamInterceptorFunc(func(next server.StreamFunc) server.StreamFunc {
			return func(ctx context.Context, info *fleet.CallInfo, st server.Stream) error {
				note("server stream " + info.Method)
				return next(ctx, info, st)
			}
		})),
	}
	k := newCalc()
	_, c := startInProcess(t, k, sopts,
		client.WithInterceptor(client.UnaryInterceptorFunc(func(next client.Invoker) client.Invoker {
			return func(ctx context.Context, service, method string, args, reply any) error {
				note("client call " + method)
				return next(ctx, service, method, args, reply)
			}
		})),
		client.WithInterceptor(client.StreamInterceptorFunc(func(next client.StreamFunc) client.StreamFunc {
			return func(ctx context.Context, spec *client.StreamSpec) (client.Stream, error) {
				note("client stream " + spec.Method)
				return next(ctx, spec)
			}
		})))
	var r ipReply
	if err := c.Call(context.Background(), "Calc", "Add", &ipArgs{A: 1}, &r); err != nil {
		t.Fatal(err)
	}
	st, err := client.CallServerStream[ipArgs, ipReply](context.Background(), c, "Calc", "Count", &ipArgs{A: 1})
	if err != nil {
		t.Fatal(err)
	}
	for st.Receive() {
	}
	st.Close()
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"client call Add", "server call Add", "client stream Count", "server stream Count"}
	if !slices.Equal(seen, want) {
		t.Fatalf("interceptors ran %q, want %q", seen, want)
	}
}

func TestInProcessStreams(t *testing.T) {
	k := newCalc()
	_, c := startInProcess(t, k, nil)
	ctx := context.Background()

	// Server stream: more messages than one window holds.
	ss, err := client.CallServerStream[ipArgs, ipReply](ctx, c, "Calc", "Count", &ipArgs{A: 5000})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for ss.Receive() {
		if ss.Msg().N != n {
			t.Fatalf("message %d carries %d", n, ss.Msg().N)
		}
		n++
	}
	if err := ss.Err(); err != nil || n != 5000 || ss.ResponseTrailer()["counted"] != "yes" {
		t.Fatalf("server stream: %d messages, %v, trailer %v; want 5000, nil, counted=yes", n, err, ss.ResponseTrailer())
	}
	ss.Close()

	// Client stream.
	cs, err := client.CallClientStream[ipArgs, ipReply](ctx, c, "Calc", "Sum")
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 100; i++ {
		if err := cs.Send(&ipArgs{A: i}); err != nil {
			t.Fatal(err)
		}
	}
	if r, err := cs.CloseAndReceive(); err != nil || r.N != 5050 {
		t.Fatalf("client stream: %+v, %v; want 5050", r, err)
	}

	// Bidi stream: send and receive in turn, then half-close.
	bs, err := client.CallBidiStream[ipArgs, ipReply](ctx, c, "Calc", "Double")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if err := bs.Send(&ipArgs{A: i}); err != nil {
			t.Fatal(err)
		}
		if r, err := bs.Receive(); err != nil || r.N != 2*i {
			t.Fatalf("bidi %d: %+v, %v", i, r, err)
		}
	}
	if err := bs.CloseRequest(); err != nil {
		t.Fatal(err)
	}
	if _, err := bs.Receive(); err != io.EOF {
		t.Fatalf("bidi end: %v, want io.EOF", err)
	}
	bs.Close()
}

// countingCodec is JSON that counts what it encodes; countingGzip is gzip
// that counts what it compresses and decompresses. The test registers
// them under application IDs to see that the in-process client's codec
// and compression options reach the wire, both ways.
type countingCodec struct{ n *atomic.Int32 }

func (countingCodec) Name() string                       { return "counting-json" }
func (c countingCodec) Marshal(v any) ([]byte, error)    { c.n.Add(1); return json.Marshal(v) }
func (countingCodec) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

type countingGzip struct{ comp, decomp *atomic.Int32 }

func (countingGzip) Name() string { return "counting-gzip" }

func (g countingGzip) Compress(dst, src []byte) ([]byte, error) {
	g.comp.Add(1)
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write(src)
	if err := w.Close(); err != nil {
		return dst, err
	}
	return append(dst, b.Bytes()...), nil
}

func (g countingGzip) Decompress(dst, src []byte, limit int) ([]byte, error) {
	g.decomp.Add(1)
	r, err := gzip.NewReader(bytes.NewReader(src))
	if err != nil {
		return dst, err
	}
	out, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return dst, err
	}
	if len(out) > limit {
		return dst, compress.ErrTooLarge
	}
	return append(dst, out...), nil
}

func TestInProcessCodecAndCompression(t *testing.T) {
	var encoded, compressed, decompressed atomic.Int32
	const id = 231
	codec.Register(id, countingCodec{&encoded})
	compress.Register(id, countingGzip{&compressed, &decompressed})
	k := newCalc()
	_, c := startInProcess(t, k, nil, client.WithCodec(id), client.WithCompression(id, 16))
	var r ipReply
	if err := c.Call(context.Background(), "Calc", "Echo", &ipArgs{A: 4000, Pad: strings.Repeat("y", 4000)}, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Text) != 4000 {
		t.Fatalf("reply of %d bytes, want 4000", len(r.Text))
	}
	// The request and the reply: each encoded with the client's codec,
	// compressed by its sender and decompressed by its receiver.
	if encoded.Load() != 2 || compressed.Load() != 2 || decompressed.Load() != 2 {
		t.Fatalf("encoded %d, compressed %d, decompressed %d payloads; want 2 each", encoded.Load(), compressed.Load(), decompressed.Load())
	}
}

// TestInProcessShutdown checks that Shutdown treats an in-process client
// as any connection: it tells it to go away, lets the running call finish
// and answer, and then ends it; a new InProcess fails with Unavailable.
func TestInProcessShutdown(t *testing.T) {
	k := newCalc()
	srv, c := startInProcess(t, k, nil)
	var r ipReply
	call := c.Go(context.Background(), "Calc", "Wait", &ipArgs{A: 7}, &r, nil)
	<-k.started
	stopped := make(chan error, 1)
	go func() { stopped <- srv.Shutdown(context.Background()) }()
	for end := time.Now().Add(10 * time.Second); !c.Draining(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the client never heard the server's go-away")
		}
	}
	err := c.Call(context.Background(), "Calc", "Add", &ipArgs{}, &ipReply{})
	if !errors.Is(err, client.ErrGoingAway) {
		t.Fatalf("call after go-away: %v, want ErrGoingAway", err)
	}
	close(k.release)
	<-call.Done
	if call.Error != nil || r.N != 7 {
		t.Fatalf("call running at Shutdown: %+v, %v; want it answered", r, call.Error)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	<-c.Done()
	if _, err := client.InProcess(srv); fleet.CodeOf(err) != fleet.Unavailable {
		t.Fatalf("InProcess after Shutdown: %v, want code Unavailable", err)
	}
}

// connCloses is a server plug-in that reports each connection it closes.
type connCloses chan net.Addr

func (cc connCloses) OnConnClose(nc net.Conn) { cc <- nc.RemoteAddr() }

// TestInProcessClose checks both ends: the client's Close ends the
// connection on the server (the open stream's handler sees it and the
// server's ConnClose hook runs), and the server's Close ends the client.
func TestInProcessClose(t *testing.T) {
	closes := make(connCloses, 4)
	k := newCalc()
	srv, c := startInProcess(t, k, []server.Option{server.WithPlugin(closes)})
	bs, err := client.CallBidiStream[ipArgs, ipReply](context.Background(), c, "Calc", "Double")
	if err != nil {
		t.Fatal(err)
	}
	if err := bs.Send(&ipArgs{A: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := bs.Receive(); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := <-k.ended; err == nil {
		t.Fatal("the stream handler's Receive returned no error after the client closed")
	}
	if a := <-closes; a.String() != "inprocess" {
		t.Fatalf("server closed a connection from %v, want inprocess", a)
	}
	wantCode(t, "call on a closed client", c.Call(context.Background(), "Calc", "Add", &ipArgs{}, &ipReply{}), fleet.Unavailable)

	c2, err := client.InProcess(srv)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	srv.Close()
	<-c2.Done()
	wantCode(t, "call after the server closed", c2.Call(context.Background(), "Calc", "Add", &ipArgs{}, &ipReply{}), fleet.Unavailable)
	<-closes
}

// blockAccept is a server plug-in whose ConnAccept hook holds every
// connection until released.
type blockAccept chan struct{}

func (b blockAccept) OnConnAccept(nc net.Conn) (net.Conn, bool) { <-b; return nc, true }

func TestInProcessArguments(t *testing.T) {
	if _, err := client.InProcess(nil); fleet.CodeOf(err) != fleet.InvalidArgument {
		t.Fatalf("nil server: %v, want InvalidArgument", err)
	}
	var none *server.Server
	if _, err := client.InProcess(none); fleet.CodeOf(err) != fleet.InvalidArgument {
		t.Fatalf("nil *server.Server: %v, want InvalidArgument", err)
	}
	// A server that does not answer the Hello within the dial timeout.
	hold := make(blockAccept)
	srv := server.New(server.WithPlugin(hold))
	defer srv.Close()
	if _, err := client.InProcess(srv, client.WithDialTimeout(20*time.Millisecond)); fleet.CodeOf(err) != fleet.Unavailable {
		t.Fatalf("unanswered Hello: %v, want Unavailable", err)
	}
	close(hold)
	// The connection to the max-conns-limited server is refused.
	lim := server.New(server.WithMaxConns(1))
	defer lim.Close()
	c, err := client.InProcess(lim)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := client.InProcess(lim); fleet.CodeOf(err) != fleet.Unavailable {
		t.Fatalf("over WithMaxConns: %v, want Unavailable", err)
	}
}
