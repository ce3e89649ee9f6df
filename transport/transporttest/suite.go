package transporttest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/compress"
	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/registry/static"
	"github.com/fleetrpc/fleet/server"
)

// Options tunes Run for a transport.
type Options struct {
	// Addr is the address the server listens at; default "127.0.0.1:0".
	Addr string
	// ClientOptions are added to every client the suite dials.
	ClientOptions []client.Option
	// ServerOptions are added to every server the suite starts.
	ServerOptions []server.Option
}

// Args is the request of the suite's Echo service.
type Args struct {
	N    int
	Text string
	Blob []byte
}

// Reply is the response of the suite's Echo service.
type Reply struct {
	N    int
	Text string
	Blob []byte
}

// Echo is the suite's service.
type Echo struct {
	sent    atomic.Int64  // oneway Note calls received
	release chan struct{} // Wait blocks until it is closed
	once    sync.Once
	entered chan struct{} // Wait signals here when it starts
}

// releaseWaits lets every Wait call, running or future, return (unexported: it
// is not an RPC method).
func (e *Echo) releaseWaits() { e.once.Do(func() { close(e.release) }) }

// Do returns its arguments, N doubled.
func (e *Echo) Do(_ context.Context, a *Args, r *Reply) error {
	r.N, r.Text, r.Blob = 2*a.N, a.Text, a.Blob
	return nil
}

// Fail returns a handler error carrying the text.
func (e *Echo) Fail(_ context.Context, a *Args, r *Reply) error {
	return errors.New("failed: " + a.Text)
}

// Note counts oneway calls.
func (e *Echo) Note(_ context.Context, a *Args, r *Reply) error {
	e.sent.Add(1)
	return nil
}

// Wait blocks until the test releases it or the call's context ends.
func (e *Echo) Wait(ctx context.Context, a *Args, r *Reply) error {
	select {
	case e.entered <- struct{}{}:
	default:
	}
	select {
	case <-e.release:
		r.N = a.N
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Server is a Fleet server serving Echo over the network under test.
type Server struct {
	Srv  *server.Server
	Echo *Echo
	// Addr is the listening address, without a network prefix.
	Addr string
	done chan struct{}
}

// StartServer starts a server with the Echo service listening over
// network at opts.Addr; it is closed when the test ends.
func StartServer(t testing.TB, network string, opts Options) *Server {
	t.Helper()
	addr := opts.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	s := &Server{
		Srv:  server.New(opts.ServerOptions...),
		Echo: &Echo{release: make(chan struct{}), entered: make(chan struct{}, 1)},
		done: make(chan struct{}),
	}
	if err := s.Srv.RegisterName("Echo", s.Echo); err != nil {
		t.Fatal(err)
	}
	lis, err := s.Srv.Listen(network, addr)
	if err != nil {
		t.Fatalf("listen %s %s: %v", network, addr, err)
	}
	s.Addr = lis.Addr().String()
	go func() {
		defer close(s.done)
		_ = s.Srv.Serve(lis)
	}()
	t.Cleanup(func() {
		s.Echo.releaseWaits()
		_ = s.Srv.Close()
		<-s.done
	})
	return s
}

// Dial dials the server over network with opts.ClientOptions and extra;
// the client is closed when the test ends.
func Dial(t testing.TB, network, addr string, opts Options, extra ...client.Option) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, network, addr, append(append([]client.Option{}, opts.ClientOptions...), extra...)...)
	if err != nil {
		t.Fatalf("dial %s %s: %v", network, addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// callCtx is the deadline of each call: generous, as CI machines are slow
// and shared.
func callCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 20*time.Second)
}

// Run runs the conformance suite over network, which must be registered
// with package transport (or be built in).
func Run(t *testing.T, network string, opts Options) {
	t.Run("CallStyles", func(t *testing.T) { testCallStyles(t, network, opts) })
	t.Run("CodecsAndCompression", func(t *testing.T) { testCodecs(t, network, opts) })
	t.Run("LargePayload", func(t *testing.T) { testLarge(t, network, opts) })
	t.Run("GracefulShutdown", func(t *testing.T) { testShutdown(t, network, opts) })
	t.Run("ServerClosedUnderCall", func(t *testing.T) { testKill(t, network, opts) })
	t.Run("XClientByRegistryEntry", func(t *testing.T) { testXClient(t, network, opts) })
}

func testCallStyles(t *testing.T, network string, opts Options) {
	s := StartServer(t, network, opts)
	c := Dial(t, network, s.Addr, opts)
	ctx, cancel := callCtx()
	defer cancel()

	var r Reply
	if err := c.Call(ctx, "Echo", "Do", &Args{N: 21, Text: "hi"}, &r); err != nil || r.N != 42 || r.Text != "hi" {
		t.Fatalf("Call: %+v, %v", r, err)
	}
	err := c.Call(ctx, "Echo", "Fail", &Args{Text: "boom"}, &r)
	if fleet.CodeOf(err) != fleet.Unknown || !strings.Contains(err.Error(), "failed: boom") {
		t.Fatalf("handler error: %v (code %v)", err, fleet.CodeOf(err))
	}
	if err := c.Call(ctx, "Echo", "Nope", &Args{}, &r); fleet.CodeOf(err) != fleet.NotFound {
		t.Fatalf("unknown method: %v", err)
	}

	const n = 200
	done := make(chan *client.Call, n)
	for i := range n {
		c.Go(ctx, "Echo", "Do", &Args{N: i}, &Reply{}, done)
	}
	for range n {
		call := <-done
		if call.Error != nil {
			t.Fatalf("Go: %v", call.Error)
		}
		if got, want := call.Reply.(*Reply).N, 2*call.Args.(*Args).N; got != want {
			t.Fatalf("Go: got %d, want %d", got, want)
		}
	}

	const notes = 50
	for i := range notes {
		if err := c.Send(ctx, "Echo", "Note", &Args{N: i}); err != nil {
			t.Fatalf("Send: %v", err)
		}
	}
	WaitFor(t, 20*time.Second, func() bool { return s.Echo.sent.Load() == notes }, "oneway calls to arrive")
}

func testCodecs(t *testing.T, network string, opts Options) {
	s := StartServer(t, network, opts)
	text := strings.Repeat("fleet over "+network+" ", 200) // compressible, past any threshold
	for _, cd := range []codec.ID{codec.JSON, codec.MsgPack, codec.Gob} {
		for _, cp := range []compress.ID{compress.None, compress.Gzip, compress.Snappy, compress.Zstd} {
			t.Run(fmt.Sprintf("%d-%d", cd, cp), func(t *testing.T) {
				c := Dial(t, network, s.Addr, opts, client.WithCodec(cd), client.WithCompression(cp, 0))
				ctx, cancel := callCtx()
				defer cancel()
				for i := range 5 {
					var r Reply
					if err := c.Call(ctx, "Echo", "Do", &Args{N: i, Text: text}, &r); err != nil {
						t.Fatal(err)
					}
					if r.N != 2*i || r.Text != text {
						t.Fatalf("reply %d: N=%d, text of %d bytes", i, r.N, len(r.Text))
					}
				}
			})
		}
	}
}

func testLarge(t *testing.T, network string, opts Options) {
	s := StartServer(t, network, opts)
	c := Dial(t, network, s.Addr, opts)
	ctx, cancel := callCtx()
	defer cancel()
	blob := make([]byte, 512<<10)
	for i := range blob {
		blob[i] = byte(i * 7)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var r Reply
			if err := c.Call(ctx, "Echo", "Do", &Args{Blob: blob}, &r); err != nil {
				errs <- err
				return
			}
			if !bytes.Equal(r.Blob, blob) {
				errs <- errors.New("blob came back changed")
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func testShutdown(t *testing.T, network string, opts Options) {
	s := StartServer(t, network, opts)
	c := Dial(t, network, s.Addr, opts)
	ctx, cancel := callCtx()
	defer cancel()
	if err := c.Call(ctx, "Echo", "Do", &Args{N: 1}, &Reply{}); err != nil {
		t.Fatal(err)
	}
	inflight := c.Go(ctx, "Echo", "Wait", &Args{N: 7}, &Reply{}, nil)
	<-s.Echo.entered
	stopped := make(chan error, 1)
	go func() {
		sctx, scancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer scancel()
		stopped <- s.Srv.Shutdown(sctx)
	}()
	// The client hears the go-away before the handler is released: new
	// calls are refused as not sent.
	WaitFor(t, 20*time.Second, c.Draining, "the client to see the go-away")
	if err := c.Call(ctx, "Echo", "Do", &Args{}, &Reply{}); !errors.Is(err, client.ErrNotSent) {
		t.Fatalf("call after go-away: %v, want ErrNotSent", err)
	}
	s.Echo.releaseWaits()
	call := <-inflight.Done
	if call.Error != nil || call.Reply.(*Reply).N != 7 {
		t.Fatalf("in-flight call during shutdown: %+v, %v", call.Reply, call.Error)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

func testKill(t *testing.T, network string, opts Options) {
	s := StartServer(t, network, opts)
	// A 2 s heartbeat bounds how long a transport without a close signal
	// (or whose close signal was lost) takes to notice.
	c := Dial(t, network, s.Addr, opts, client.WithHeartbeat(2*time.Second))
	ctx, cancel := callCtx()
	defer cancel()
	call := c.Go(ctx, "Echo", "Wait", &Args{}, &Reply{}, nil)
	select {
	case <-s.Echo.entered:
	case got := <-call.Done:
		t.Fatalf("call ended before the server was closed: %v", got.Error)
	}
	_ = s.Srv.Close()
	// As over TCP, the call fails with Unavailable: the connection was
	// lost, not the deadline reached.
	if got := <-call.Done; fleet.CodeOf(got.Error) != fleet.Unavailable {
		t.Fatalf("call on a closed server: %v, want code Unavailable", got.Error)
	}
}

func testXClient(t *testing.T, network string, opts Options) {
	s := StartServer(t, network, opts)
	for _, in := range []registry.Instance{
		{Service: "Echo", Addr: network + "@" + s.Addr},
		{Service: "Echo", Addr: s.Addr, Network: network},
	} {
		tab, err := static.NewTable(static.Config{Instances: []registry.Instance{in}})
		if err != nil {
			t.Fatal(err)
		}
		x, err := client.NewXClient("Echo", tab.Discovery(), client.WithClientOptions(opts.ClientOptions...))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := callCtx()
		var r Reply
		err = x.Call(ctx, "Do", &Args{N: 4}, &r)
		cancel()
		x.Close()
		if err != nil || r.N != 8 {
			t.Fatalf("XClient over %+v: %+v, %v", in, r, err)
		}
	}
}

// WaitFor polls cond every 5 ms until it holds or timeout passes, then
// fails the test naming what it waited for.
func WaitFor(t testing.TB, timeout time.Duration, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
