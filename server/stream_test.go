package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/compress"
	"github.com/fleetrpc/fleet/internal/testutil"
	"github.com/fleetrpc/fleet/protocol"
	"github.com/fleetrpc/fleet/server"
	"go.uber.org/goleak"
)

type Count struct{ N int }
type Chunk struct {
	I    int
	Data []byte
}

// streamServer serves the stream methods the tests use; running counts
// stream handlers in progress.
func streamServer(t *testing.T, opts ...server.Option) (addr string, running *atomic.Int64, sent *atomic.Int64) {
	t.Helper()
	running, sent = new(atomic.Int64), new(atomic.Int64)
	srv := server.New(opts...)
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	// Range sends N messages numbered 0..N-1 and a trailer.
	must(server.HandleServerStream(srv, "S", "Range", func(ctx context.Context, req *Count, st *server.ServerStream[Count]) error {
		running.Add(1)
		defer running.Add(-1)
		for i := 0; i < req.N; i++ {
			if err := st.Send(&Count{i}); err != nil {
				return err
			}
		}
		st.ResponseTrailer()["sent"] = fmt.Sprint(req.N)
		fleet.SetResponseMetadata(ctx, "via", "call-info")
		return nil
	}))
	// FailAfter sends N messages, then fails with PermissionDenied.
	must(server.HandleServerStream(srv, "S", "FailAfter", func(ctx context.Context, req *Count, st *server.ServerStream[Count]) error {
		for i := 0; i < req.N; i++ {
			if err := st.Send(&Count{i}); err != nil {
				return err
			}
		}
		return fleet.NewError(fleet.PermissionDenied, "no more for you")
	}))
	// Flood sends chunks of req.N bytes until the stream ends, counting
	// the payload bytes whose Send returned.
	must(server.HandleServerStream(srv, "S", "Flood", func(ctx context.Context, req *Count, st *server.ServerStream[Chunk]) error {
		running.Add(1)
		defer running.Add(-1)
		data := make([]byte, req.N)
		for i := 0; ; i++ {
			if err := st.Send(&Chunk{I: i, Data: data}); err != nil {
				return err
			}
			sent.Add(int64(req.N))
		}
	}))
	// Wait blocks until the stream's context ends.
	must(server.HandleServerStream(srv, "S", "Wait", func(ctx context.Context, req *Count, st *server.ServerStream[Count]) error {
		running.Add(1)
		defer running.Add(-1)
		<-ctx.Done()
		return ctx.Err()
	}))
	// Sum adds the client's numbers.
	must(server.HandleClientStream(srv, "S", "Sum", func(ctx context.Context, st *server.ClientStream[Count]) (*Count, error) {
		total := 0
		for st.Receive() {
			total += st.Msg().N
		}
		if err := st.Err(); err != nil {
			return nil, err
		}
		st.ResponseTrailer()["count"] = "done"
		return &Count{total}, nil
	}))
	// Echo returns each message doubled, then one final message with the
	// count after the client's half-close.
	must(server.HandleBidiStream(srv, "S", "Echo", func(ctx context.Context, st *server.BidiStream[Count, Count]) error {
		n := 0
		for {
			m, err := st.Receive()
			if err == io.EOF {
				return st.Send(&Count{-n})
			}
			if err != nil {
				return err
			}
			n++
			if err := st.Send(&Count{2 * m.N}); err != nil {
				return err
			}
		}
	}))
	srv.RegisterFunction("U", "Echo", func(ctx context.Context, in *Msg, out *Msg) error { out.S = in.S; return nil })
	return testutil.Serve(t, srv), running, sent
}

// receiveRange opens S.Range for n messages on c and checks that 0..n-1
// arrive in order and the stream ends without error; it returns the ended
// stream.
func receiveRange(t *testing.T, ctx context.Context, c *client.Client, n int) *client.ServerStreamForClient[Count] {
	t.Helper()
	st, err := client.CallServerStream[Count, Count](ctx, c, "S", "Range", &Count{n})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	got := 0
	for st.Receive() {
		if st.Msg().N != got {
			t.Fatalf("message %d is %d", got, st.Msg().N)
		}
		got++
	}
	if err := st.Err(); err != nil || got != n {
		t.Fatalf("received %d of %d, err %v", got, n, err)
	}
	return st
}

func TestServerStream(t *testing.T) {
	addr, _, _ := streamServer(t)
	c := dial(t, addr)
	ctx := context.Background()
	st := receiveRange(t, ctx, c, 1000)
	if tr := st.ResponseTrailer(); tr["sent"] != "1000" || tr["via"] != "call-info" {
		t.Fatalf("trailer %v", tr)
	}
}

func TestServerStreamErrorMidStream(t *testing.T) {
	addr, _, _ := streamServer(t)
	c := dial(t, addr)
	st, err := client.CallServerStream[Count, Count](context.Background(), c, "S", "FailAfter", &Count{3})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	n := 0
	for st.Receive() {
		n++
	}
	if n != 3 || fleet.CodeOf(st.Err()) != fleet.PermissionDenied || !strings.Contains(st.Err().Error(), "no more for you") {
		t.Fatalf("received %d, err %v", n, st.Err())
	}
}

func TestClientStream(t *testing.T) {
	addr, _, _ := streamServer(t)
	c := dial(t, addr)
	st, err := client.CallClientStream[Count, Count](context.Background(), c, "S", "Sum")
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 100; i++ {
		if err := st.Send(&Count{i}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := st.CloseAndReceive()
	if err != nil || res.N != 5050 {
		t.Fatalf("sum %v, %v", res, err)
	}
	if tr := st.ResponseTrailer(); tr["count"] != "done" {
		t.Fatalf("trailer %v", tr)
	}
}

func TestBidiStreamHalfClose(t *testing.T) {
	addr, _, _ := streamServer(t)
	c := dial(t, addr)
	st, err := client.CallBidiStream[Count, Count](context.Background(), c, "S", "Echo")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i := 1; i <= 50; i++ {
		if err := st.Send(&Count{i}); err != nil {
			t.Fatal(err)
		}
		m, err := st.Receive()
		if err != nil || m.N != 2*i {
			t.Fatalf("echo of %d: %v, %v", i, m, err)
		}
	}
	if err := st.CloseRequest(); err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&Count{1}); fleet.CodeOf(err) != fleet.FailedPrecondition {
		t.Fatalf("send after CloseRequest: %v", err)
	}
	m, err := st.Receive()
	if err != nil || m.N != -50 {
		t.Fatalf("final message %v, %v", m, err)
	}
	if _, err := st.Receive(); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
}

// TestStreamFlowControlNoHeadOfLine: a server stream floods a consumer
// that stops reading. The producer is held back by the window (the bytes
// it managed to send stay within the window), and a unary call on the same
// connection still completes.
func TestStreamFlowControlNoHeadOfLine(t *testing.T) {
	const window, chunk = 64 << 10, 8 << 10
	addr, running, sent := streamServer(t)
	c := dial(t, addr, client.WithStreamWindow(window))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := client.CallServerStream[Count, Chunk](ctx, c, "S", "Flood", &Count{chunk})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if !st.Receive() {
		t.Fatal(st.Err())
	}
	// The producer fills the window (less than half was consumed, so no
	// credit came back) and then blocks in Send: exactly window/size
	// messages fit (message numbers below 128 encode in one byte).
	one, err := codec.Get(codec.MsgPack).Marshal(&Chunk{I: 1, Data: make([]byte, chunk)})
	if err != nil {
		t.Fatal(err)
	}
	fit := int64(window / len(one))
	waitFor(t, "window filled", func() bool { return sent.Load() == fit*chunk })
	for i := 0; i < 20; i++ {
		var out Msg
		if err := c.Call(context.Background(), "U", "Echo", &Msg{"through"}, &out); err != nil || out.S != "through" {
			t.Fatalf("unary call behind a blocked stream: %q %v", out.S, err)
		}
	}
	// Each message is chunk bytes of data plus a small JSON envelope
	// (base64 inflates the data), so at most window/chunk messages fit.
	if s := sent.Load(); s > window {
		t.Fatalf("producer sent %d bytes past a %d-byte window", s, window)
	}
	if b := st.Buffered(); b > window {
		t.Fatalf("consumer buffers %d bytes, window %d", b, window)
	}
	// Consuming releases the producer.
	for i := 0; i < 50; i++ {
		if !st.Receive() {
			t.Fatal(st.Err())
		}
	}
	st.Close()
	waitFor(t, "producer ended by the cancel", func() bool { return running.Load() == 0 })
}

// TestStreamCancelEndsHandler: cancelling the caller's context mid-stream
// ends the server's handler (its context is done) and the client's
// Receive.
func TestStreamCancelEndsHandler(t *testing.T) {
	addr, running, _ := streamServer(t)
	c := dial(t, addr)
	ctx, cancel := context.WithCancel(context.Background())
	streams := make([]*client.ServerStreamForClient[Count], 5)
	for i := range streams {
		st, err := client.CallServerStream[Count, Count](ctx, c, "S", "Wait", &Count{})
		if err != nil {
			t.Fatal(err)
		}
		streams[i] = st
	}
	waitFor(t, "handlers running", func() bool { return running.Load() == 5 })
	cancel()
	for _, st := range streams {
		if st.Receive() || fleet.CodeOf(st.Err()) != fleet.Canceled {
			t.Fatalf("receive after cancel: %v", st.Err())
		}
	}
	waitFor(t, "handlers ended", func() bool { return running.Load() == 0 })
	if err := c.Call(context.Background(), "U", "Echo", &Msg{"x"}, &Msg{}); err != nil {
		t.Fatal(err)
	}
}

// TestStreamDeadline: the caller's deadline ends the stream on both sides.
func TestStreamDeadline(t *testing.T) {
	addr, running, _ := streamServer(t)
	c := dial(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	st, err := client.CallServerStream[Count, Count](ctx, c, "S", "Wait", &Count{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if st.Receive() || fleet.CodeOf(st.Err()) != fleet.DeadlineExceeded {
		t.Fatalf("receive past the deadline: %v", st.Err())
	}
	waitFor(t, "handler ended", func() bool { return running.Load() == 0 })
}

func TestStreamRefusals(t *testing.T) {
	addr, running, _ := streamServer(t, server.WithMaxStreamsPerConn(2))
	c := dial(t, addr)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := client.CallServerStream[Count, Count](ctx, c, "S", "Nope", &Count{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Receive() || fleet.CodeOf(st.Err()) != fleet.NotFound {
		t.Fatalf("unknown method: %v", st.Err())
	}
	st.Close()
	for i := 0; i < 2; i++ {
		if _, err := client.CallServerStream[Count, Count](ctx, c, "S", "Wait", &Count{}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "two streams open", func() bool { return running.Load() == 2 })
	st, err = client.CallServerStream[Count, Count](ctx, c, "S", "Wait", &Count{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Receive() || fleet.CodeOf(st.Err()) != fleet.ResourceExhausted {
		t.Fatalf("stream over the cap: %v", st.Err())
	}
	cancel()
	waitFor(t, "handlers ended", func() bool { return running.Load() == 0 })
}

// TestStreamBadInput: data for an unknown stream is ignored; a stream
// whose sender overruns the window is reset with ResourceExhausted; the
// connection serves on.
func TestStreamBadInput(t *testing.T) {
	addr, _, _ := streamServer(t, server.WithStreamWindow(1024), server.WithLogger(discardLogger()))
	rc := dialRaw(t, addr)
	hello := protocol.AppendHello(nil, &protocol.Hello{Revision: protocol.Revision, Capabilities: protocol.CapCancel | protocol.CapStreams})
	rc.write(protocol.AppendControl(nil, protocol.TypePing, protocol.FlagHello, 0, hello))
	if h, _, err := rc.next(); err != nil || h.Type != protocol.TypePong {
		t.Fatalf("%+v %v", h, err)
	}
	rc.write(protocol.AppendControl(nil, protocol.TypeStreamData, 0, 999, []byte(`{"N":1}`)))
	rc.write(protocol.AppendControl(nil, protocol.TypeWindowUpdate, 0, 999, []byte{0, 0, 0, 0}))
	// Wait consumes its request and nothing more: after the first
	// message, two more (1414 bytes) overrun the 1024-byte window.
	open, _ := protocol.AppendFrame(nil, &protocol.Header{Type: protocol.TypeStreamOpen, Codec: 1, Seq: 5}, "S", "Wait", nil, nil, 0)
	rc.write(open)
	big := `{"N":1}` + strings.Repeat(" ", 700)
	for i := 0; i < 3; i++ {
		b, _ := protocol.AppendFrame(nil, &protocol.Header{Type: protocol.TypeStreamData, Codec: 1, Seq: 5}, "", "", nil, []byte(big), 0)
		rc.write(b)
	}
	h, p, err := rc.next()
	for err == nil && h.Type == protocol.TypeWindowUpdate {
		h, p, err = rc.next()
	}
	if err != nil || h.Type != protocol.TypeStreamEnd || h.Seq != 5 || fleet.Code(h.Status) != fleet.ResourceExhausted {
		t.Fatalf("overrun: %+v %q %v", h, p, err)
	}
	rc.request(6, "alive") // Svc.Echo is not served here: a not_found answer shows the connection works
	if h, _, err := rc.next(); err != nil || h.Type != protocol.TypeResponse || h.Seq != 6 || fleet.Code(h.Status) != fleet.NotFound {
		t.Fatalf("after bad stream input: %+v %v", h, err)
	}
}

var _ = errors.Is

// TestStreamSlowConsumerMemoryBounded: 32 MiB streamed to a consumer that
// pauses now and then. At every message the bytes the producer has
// finished sending minus the bytes consumed stay within the window, and
// the consumer's buffer stays within the window too.
func TestStreamSlowConsumerMemoryBounded(t *testing.T) {
	const window, chunk, total = 128 << 10, 16 << 10, 32 << 20
	var sent atomic.Int64
	srv := server.New()
	err := server.HandleServerStream(srv, "S", "Bytes", func(ctx context.Context, req *[]byte, st *server.ServerStream[[]byte]) error {
		data := make([]byte, chunk)
		for n := 0; n < total; n += chunk {
			if err := st.Send(&data); err != nil {
				return err
			}
			sent.Add(chunk)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, testutil.Serve(t, srv), client.WithStreamWindow(window))
	st, err := client.CallServerStream[[]byte, []byte](context.Background(), c, "S", "Bytes", &[]byte{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var received int64
	for i := 0; st.Receive(); i++ {
		received += int64(len(*st.Msg()))
		if ahead := sent.Load() - received; ahead > window {
			t.Fatalf("producer %d bytes ahead of the consumer, window %d", ahead, window)
		}
		if b := st.Buffered(); b > window {
			t.Fatalf("consumer buffers %d bytes, window %d", b, window)
		}
		if i%256 == 0 {
			time.Sleep(2 * time.Millisecond) // a slow consumer
		}
	}
	if err := st.Err(); err != nil || received != total {
		t.Fatalf("received %d of %d: %v", received, total, err)
	}
}

// TestStreamCancelFreesGoroutines: with the connection staying open,
// cancelling streams mid-way brings both sides' goroutines back to what
// they were before the streams opened.
func TestStreamCancelFreesGoroutines(t *testing.T) {
	addr, running, _ := streamServer(t)
	c := dial(t, addr)
	if err := c.Call(context.Background(), "U", "Echo", &Msg{"warm"}, &Msg{}); err != nil {
		t.Fatal(err)
	}
	baseline := goleak.IgnoreCurrent()
	ctx, cancel := context.WithCancel(context.Background())
	for i := 0; i < 5; i++ {
		st, err := client.CallServerStream[Count, Chunk](ctx, c, "S", "Flood", &Count{1024})
		if err != nil {
			t.Fatal(err)
		}
		if !st.Receive() {
			t.Fatal(st.Err())
		}
	}
	waitFor(t, "producers running", func() bool { return running.Load() == 5 })
	cancel()
	waitFor(t, "producers ended", func() bool { return running.Load() == 0 })
	// goleak retries for about a second per look; look again for up to 20 s
	// on a loaded machine before reporting.
	var leak error
	waitFor(t, "goroutines back to the baseline", func() bool { leak = goleak.Find(baseline); return leak == nil })
}

func TestStreamInterceptors(t *testing.T) {
	var seen []string
	var mu sync.Mutex
	rec := func(s string) { mu.Lock(); seen = append(seen, s); mu.Unlock() }
	addr, _, _ := streamServer(t, server.WithInterceptor(
		server.StreamInterceptorFunc(func(next server.StreamFunc) server.StreamFunc {
			return func(ctx context.Context, info *fleet.CallInfo, st server.Stream) error {
				rec("outer " + info.Method)
				err := next(ctx, info, st)
				rec(fmt.Sprintf("outer end %v", fleet.CodeOf(err)))
				return err
			}
		}),
		server.StreamInterceptorFunc(func(next server.StreamFunc) server.StreamFunc {
			return func(ctx context.Context, info *fleet.CallInfo, st server.Stream) error {
				if info.Metadata()["deny"] != "" {
					return fleet.NewError(fleet.PermissionDenied, "denied by interceptor")
				}
				return next(ctx, info, st)
			}
		})))
	c := dial(t, addr)
	st, err := client.CallServerStream[Count, Count](context.Background(), c, "S", "Range", &Count{2})
	if err != nil {
		t.Fatal(err)
	}
	for st.Receive() {
	}
	st.Close()
	if st.Err() != nil {
		t.Fatal(st.Err())
	}
	ctx := fleet.WithOutgoingMetadata(context.Background(), fleet.Metadata{"deny": "1"})
	st, err = client.CallServerStream[Count, Count](ctx, c, "S", "Range", &Count{2})
	if err != nil {
		t.Fatal(err)
	}
	if st.Receive() || fleet.CodeOf(st.Err()) != fleet.PermissionDenied {
		t.Fatalf("denied stream: %v", st.Err())
	}
	st.Close()
	mu.Lock()
	defer mu.Unlock()
	want := "outer Range|outer end ok|outer Range|outer end permission_denied"
	if got := strings.Join(seen, "|"); got != want {
		t.Fatalf("interceptors saw %q, want %q", got, want)
	}
}

// TestShutdownWaitsForStreams: graceful shutdown waits for running
// streams like it waits for calls; a client told to go away opens no new
// stream; when Shutdown gives up (its context ends) the streams end too.
func TestShutdownWaitsForStreams(t *testing.T) {
	running := new(atomic.Int64)
	srv := server.New()
	server.HandleServerStream(srv, "S", "Wait", func(ctx context.Context, req *Count, st *server.ServerStream[Count]) error {
		running.Add(1)
		defer running.Add(-1)
		<-ctx.Done()
		return ctx.Err()
	})
	c := dial(t, testutil.Serve(t, srv))
	st, err := client.CallServerStream[Count, Count](context.Background(), c, "S", "Wait", &Count{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	waitFor(t, "stream running", func() bool { return running.Load() == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- srv.Shutdown(ctx) }()
	waitFor(t, "client told to go away", c.Draining)
	if _, err := client.CallServerStream[Count, Count](context.Background(), c, "S", "Wait", &Count{}); !errors.Is(err, client.ErrGoingAway) {
		t.Fatalf("stream opened after go-away: %v", err)
	}
	if err := <-errc; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown with a running stream returned %v", err)
	}
	if st.Receive() {
		t.Fatal("message after shutdown")
	}
	waitFor(t, "stream ended", func() bool { return running.Load() == 0 })
}

// TestStreamCompression: with client compression, large stream messages
// are compressed both ways (the server uses the compressor the open frame
// names) and arrive intact.
func TestStreamCompression(t *testing.T) {
	srv := server.New()
	server.HandleBidiStream(srv, "S", "Echo", func(ctx context.Context, st *server.BidiStream[Chunk, Chunk]) error {
		for {
			m, err := st.Receive()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			if err := st.Send(m); err != nil {
				return err
			}
		}
	})
	for _, id := range []compress.ID{compress.Gzip, compress.Snappy, compress.Zstd} {
		c := dial(t, testutil.Serve(t, srv), client.WithCompression(id, 512))
		st, err := client.CallBidiStream[Chunk, Chunk](context.Background(), c, "S", "Echo")
		if err != nil {
			t.Fatal(err)
		}
		for i, size := range []int{10, 64 << 10, 600 << 10} { // under the threshold, over it, over the window
			data := []byte(strings.Repeat("fleet ", size/6+1))[:size]
			if err := st.Send(&Chunk{I: i, Data: data}); err != nil {
				t.Fatal(err)
			}
			m, err := st.Receive()
			if err != nil || m.I != i || string(m.Data) != string(data) {
				t.Fatalf("compression %d, message %d: %v", id, i, err)
			}
		}
		st.CloseRequest()
		if _, err := st.Receive(); err != io.EOF {
			t.Fatalf("end: %v", err)
		}
		st.Close()
	}
}

// TestStreamTransports: a bidirectional stream over TCP, a Unix socket and
// TLS.
func TestStreamTransports(t *testing.T) {
	srvTLS, cliTLS := testutil.TLSConfigs(t)
	sock := filepath.Join(t.TempDir(), "fleet-stream.sock")
	for _, tc := range []struct{ network, addr string }{
		{"tcp", "127.0.0.1:0"}, {"unix", sock}, {"tls", "127.0.0.1:0"},
	} {
		t.Run(tc.network, func(t *testing.T) {
			srv := server.New(server.WithTLS(srvTLS))
			server.HandleBidiStream(srv, "S", "Double", func(ctx context.Context, st *server.BidiStream[Count, Count]) error {
				for {
					m, err := st.Receive()
					if err == io.EOF {
						return nil
					}
					if err != nil {
						return err
					}
					if err := st.Send(&Count{2 * m.N}); err != nil {
						return err
					}
				}
			})
			lis, err := srv.Listen(tc.network, tc.addr)
			if err != nil {
				t.Fatal(err)
			}
			go srv.Serve(lis)
			defer srv.Close()
			c, err := client.Dial(context.Background(), tc.network, lis.Addr().String(), client.WithTLS(tlsIf(tc.network == "tls", cliTLS)))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			st, err := client.CallBidiStream[Count, Count](context.Background(), c, "S", "Double")
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			for i := 0; i < 100; i++ {
				if err := st.Send(&Count{i}); err != nil {
					t.Fatal(err)
				}
			}
			st.CloseRequest()
			for i := 0; i < 100; i++ {
				m, err := st.Receive()
				if err != nil || m.N != 2*i {
					t.Fatalf("message %d: %v %v", i, m, err)
				}
			}
			if _, err := st.Receive(); err != io.EOF {
				t.Fatalf("end: %v", err)
			}
		})
	}
}

// TestClientStreamInterceptors: a client stream interceptor adds metadata
// the handler sees, can refuse a stream before it is opened, and, by
// wrapping the Stream it returns, sees every message the typed stream
// sends and receives and its close.
func TestClientStreamInterceptors(t *testing.T) {
	srv := server.New()
	server.HandleServerStream(srv, "S", "Who", func(ctx context.Context, req *Count, st *server.ServerStream[Msg]) error {
		return st.Send(&Msg{fleet.IncomingMetadata(ctx)["tenant"]})
	})
	server.HandleBidiStream(srv, "S", "Echo", func(ctx context.Context, st *server.BidiStream[Msg, Msg]) error {
		for {
			m, err := st.Receive()
			if err != nil {
				if err == io.EOF {
					return nil
				}
				return err
			}
			if err := st.Send(m); err != nil {
				return err
			}
		}
	})
	var mu sync.Mutex
	var seen []string
	rec := func(s string) { mu.Lock(); seen = append(seen, s); mu.Unlock() }
	c := dial(t, testutil.Serve(t, srv), client.WithInterceptor(client.StreamInterceptorFunc(func(next client.StreamFunc) client.StreamFunc {
		return func(ctx context.Context, spec *client.StreamSpec) (client.Stream, error) {
			if spec.Method == "Forbidden" {
				return nil, fleet.NewError(fleet.PermissionDenied, "not from here")
			}
			st, err := next(fleet.WithOutgoingMetadata(ctx, fleet.Metadata{"tenant": "blue"}), spec)
			if err != nil {
				return nil, err
			}
			rec("open " + spec.Method)
			return &seeingStream{Stream: st, rec: rec}, nil
		}
	})))
	st, err := client.CallServerStream[Count, Msg](context.Background(), c, "S", "Who", &Count{})
	if err != nil {
		t.Fatal(err)
	}
	if !st.Receive() || st.Msg().S != "blue" {
		t.Fatalf("metadata from the interceptor: %v %v", st.Msg(), st.Err())
	}
	if st.Receive() || st.Err() != nil {
		t.Fatalf("Who's end: %v", st.Err())
	}
	st.Close()
	if _, err := client.CallServerStream[Count, Msg](context.Background(), c, "S", "Forbidden", &Count{}); fleet.CodeOf(err) != fleet.PermissionDenied {
		t.Fatalf("refused stream: %v", err)
	}
	bs, err := client.CallBidiStream[Msg, Msg](context.Background(), c, "S", "Echo")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"x", "y"} {
		if err := bs.Send(&Msg{s}); err != nil {
			t.Fatal(err)
		}
		if m, err := bs.Receive(); err != nil || m.S != s {
			t.Fatalf("echo of %s: %v, %v", s, m, err)
		}
	}
	bs.CloseRequest()
	if _, err := bs.Receive(); err != io.EOF {
		t.Fatalf("Echo's end: %v", err)
	}
	bs.Close()
	mu.Lock()
	defer mu.Unlock()
	want := []string{"open Who", "send", "closereq", "recv ok", "recv EOF", "close",
		"open Echo", "send", "recv ok", "send", "recv ok", "closereq", "recv EOF", "close"}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("the interceptor's stream saw\n%q\nwant\n%q", seen, want)
	}
}

// seeingStream records what goes through a client Stream.
type seeingStream struct {
	client.Stream
	rec func(string)
}

func (s *seeingStream) Send(msg any) error { s.rec("send"); return s.Stream.Send(msg) }

func (s *seeingStream) Receive(msg any) error {
	err := s.Stream.Receive(msg)
	switch {
	case err == nil:
		s.rec("recv ok")
	case err == io.EOF:
		s.rec("recv EOF")
	default:
		s.rec("recv " + err.Error())
	}
	return err
}

func (s *seeingStream) CloseRequest() error { s.rec("closereq"); return s.Stream.CloseRequest() }
func (s *seeingStream) Close() error        { s.rec("close"); return s.Stream.Close() }

// TestStreamSmallThenLargeMessage: with a 1024-byte window, a small
// message that the server consumes (under half the window, so no grant
// comes back) and then a message larger than the remaining credit must
// both go through. Before the fix FuzzFlow found, the second Send waited
// for credit that never came, until the deadline.
func TestStreamSmallThenLargeMessage(t *testing.T) {
	addr, _, _ := streamServer(t, server.WithStreamWindow(1024))
	c := dial(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := client.CallBidiStream[Chunk, Count](ctx, c, "S", "Echo")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i, size := range []int{1, 1000, 1, 3000} {
		if err := st.Send(&Chunk{I: i, Data: make([]byte, size)}); err != nil {
			t.Fatalf("message %d (%d bytes): %v", i, size, err)
		}
		if _, err := st.Receive(); err != nil {
			t.Fatalf("echo of message %d (%d bytes): %v", i, size, err)
		}
	}
	if err := st.CloseRequest(); err != nil {
		t.Fatal(err)
	}
	if m, err := st.Receive(); err != nil || m.N != -4 {
		t.Fatalf("final message %v, %v", m, err)
	}
}
