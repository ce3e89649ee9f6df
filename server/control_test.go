package server_test

import (
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/internal/bufpool"
	"github.com/fleetrpc/fleet/internal/testutil"
	"github.com/fleetrpc/fleet/protocol"
	"github.com/fleetrpc/fleet/server"
)

// rawConn is a hand-driven client connection for wire-level tests.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	r  *protocol.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	return &rawConn{t: t, nc: nc, r: protocol.NewReader(nc, 0, protocol.Limits{})}
}

func (rc *rawConn) write(b []byte) {
	rc.t.Helper()
	if _, err := rc.nc.Write(b); err != nil {
		rc.t.Fatal(err)
	}
}

// request writes an Echo request with the given seq.
func (rc *rawConn) request(seq uint64, s string) {
	rc.t.Helper()
	payload, _ := codec.Get(codec.JSON).Marshal(&Msg{s})
	b, err := protocol.AppendFrame(nil, &protocol.Header{Type: protocol.TypeRequest, Codec: byte(codec.JSON), Seq: seq}, "Svc", "Echo", nil, payload, 0)
	if err != nil {
		rc.t.Fatal(err)
	}
	rc.write(b)
}

// next reads the next frame, copying what the test needs.
func (rc *rawConn) next() (protocol.Header, []byte, error) {
	f, buf, err := rc.r.ReadFrame()
	if err != nil {
		return protocol.Header{}, nil, err
	}
	p := append([]byte(nil), f.Payload...)
	bufpool.Put(buf)
	return f.Header, p, nil
}

// TestUnknownFrameTypeIgnored: frames of a type the server does not know,
// with unknown flags, are skipped; the connection keeps serving.
func TestUnknownFrameTypeIgnored(t *testing.T) {
	_, _, addr := newServer(t)
	rc := dialRaw(t, addr)
	rc.write(protocol.AppendControl(nil, 200, 0xF0, 1, []byte("from the future")))
	rc.write(protocol.AppendControl(nil, protocol.TypeCancel, 0, 12345, nil)) // unknown seq: ignored
	rc.request(7, "still here")
	h, p, err := rc.next()
	if err != nil || h.Type != protocol.TypeResponse || h.Seq != 7 || h.Status != 0 {
		t.Fatalf("after unknown frames: %+v %q %v", h, p, err)
	}
}

// TestRevision1ClientServed: a client that sends no Hello (a revision 1
// build) is served as before and receives no revision 2 frame; its pings
// get plain pongs.
func TestRevision1ClientServed(t *testing.T) {
	_, _, addr := newServer(t)
	rc := dialRaw(t, addr)
	rc.write(protocol.AppendControl(nil, protocol.TypePing, 0, 3, nil))
	rc.request(1, "old")
	for i := 0; i < 2; i++ {
		h, _, err := rc.next()
		if err != nil {
			t.Fatal(err)
		}
		if !h.Type.Known() || h.Type > protocol.TypeGoAway || h.Flags&protocol.FlagHello != 0 {
			t.Fatalf("revision 1 client got %+v", h)
		}
	}
}

// TestHelloAnswered: a Hello ping gets a pong with the server's Hello.
func TestHelloAnswered(t *testing.T) {
	_, _, addr := newServer(t)
	rc := dialRaw(t, addr)
	hello := protocol.AppendHello(nil, &protocol.Hello{Revision: protocol.Revision, Capabilities: protocol.CapCancel})
	rc.write(protocol.AppendControl(nil, protocol.TypePing, protocol.FlagHello, 0, hello))
	h, p, err := rc.next()
	if err != nil || h.Type != protocol.TypePong || h.Flags&protocol.FlagHello == 0 {
		t.Fatalf("answer to hello: %+v %v", h, err)
	}
	sh, err := protocol.ParseHello(p)
	if err != nil || sh.Revision != protocol.Revision || sh.Capabilities&protocol.CapCancel == 0 {
		t.Fatalf("server hello %+v %v", sh, err)
	}
}

// TestProtocolErrorGetsGoAway: a peer that spoke Fleet and then sends a
// broken frame gets a go-away with reason protocol error, the last
// sequence id read and a message, then the close.
func TestProtocolErrorGetsGoAway(t *testing.T) {
	_, _, addr := newServer(t, server.WithLogger(discardLogger()))
	rc := dialRaw(t, addr)
	rc.request(41, "ok")
	if h, _, err := rc.next(); err != nil || h.Seq != 41 {
		t.Fatalf("%+v %v", h, err)
	}
	rc.write(append([]byte{0, 0, 0, 30}, make([]byte, 30)...)) // bad magic
	h, p, err := rc.next()
	if err != nil || h.Type != protocol.TypeGoAway {
		t.Fatalf("want go-away, got %+v %v", h, err)
	}
	g, err := protocol.ParseGoAway(p)
	if err != nil || g.Reason != protocol.GoAwayProtocolError || !g.HasLastSeq || g.LastSeq != 41 || g.Message == "" {
		t.Fatalf("go-away %+v %v", g, err)
	}
	if _, _, err := rc.next(); err == nil {
		t.Fatal("connection not closed after the go-away")
	}
}

// TestShutdownGoAwayCarriesLastSeq: a client sees the shutdown reason and
// the last sequence id the server read.
func TestShutdownGoAwayCarriesLastSeq(t *testing.T) {
	srv, _, addr := newServer(t)
	c := dial(t, addr)
	for i := 0; i < 3; i++ {
		if err := c.Call(context.Background(), "Svc", "Echo", &Msg{"x"}, &Msg{}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	g := c.GoAway()
	if g == nil || g.Reason != protocol.GoAwayShutdown || !g.HasLastSeq || g.LastSeq != 3 {
		t.Fatalf("go-away %+v", g)
	}
}

// TestCancelFrameEndsHandlers: N calls whose handlers wait on ctx.Done
// are cancelled on the client; the server's count of running handlers
// drops to zero (cancel frames, not the connection's end: the client stays
// open and usable).
func TestCancelFrameEndsHandlers(t *testing.T) {
	const n = 20
	var running atomic.Int64
	srv := server.New()
	srv.RegisterFunction("S", "Wait", func(ctx context.Context, in *Msg, out *Msg) error {
		running.Add(1)
		defer running.Add(-1)
		<-ctx.Done()
		return ctx.Err()
	})
	srv.RegisterFunction("S", "Echo", func(ctx context.Context, in *Msg, out *Msg) error { out.S = in.S; return nil })
	addr := testutil.Serve(t, srv)
	c := dial(t, addr)
	waitFor(t, "hello answered", func() bool { return c.Capabilities()&protocol.CapCancel != 0 })
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if i%2 == 0 {
				c.Call(ctx, "S", "Wait", &Msg{}, &Msg{})
			} else {
				<-c.Go(ctx, "S", "Wait", &Msg{}, &Msg{}, nil).Done
			}
		}(i)
	}
	waitFor(t, "all handlers running", func() bool { return running.Load() == n })
	cancel()
	wg.Wait()
	waitFor(t, "handlers ended by cancel frames", func() bool { return running.Load() == 0 })
	if err := c.Call(context.Background(), "S", "Echo", &Msg{"x"}, &Msg{}); err != nil {
		t.Fatalf("connection unusable after cancels: %v", err)
	}
}

// waitFor polls cond every millisecond for up to 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

var _ = fleet.OK
var _ = client.ErrClosed

// TestIdleTimeoutGoAway: a connection closed for idleness gets a go-away
// with reason idle first, and the client's error says so.
func TestIdleTimeoutGoAway(t *testing.T) {
	_, _, addr := newServer(t, server.WithIdleTimeout(300*time.Millisecond))
	rc := dialRaw(t, addr)
	rc.request(9, "then silence")
	if h, _, err := rc.next(); err != nil || h.Seq != 9 {
		t.Fatalf("%+v %v", h, err)
	}
	h, p, err := rc.next()
	if err != nil || h.Type != protocol.TypeGoAway {
		t.Fatalf("want go-away, got %+v %v", h, err)
	}
	if g, err := protocol.ParseGoAway(p); err != nil || g.Reason != protocol.GoAwayIdle || g.LastSeq != 9 {
		t.Fatalf("go-away %+v %v", g, err)
	}

	c := dial(t, addr, client.WithHeartbeat(0))
	if err := c.Call(context.Background(), "Svc", "Echo", &Msg{"x"}, &Msg{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("idle connection not closed")
	}
	if err := c.Err(); !strings.Contains(err.Error(), "idle timeout") || fleet.CodeOf(err) != fleet.Unavailable {
		t.Fatalf("client error %v", err)
	}
}

// TestCancelFrameReachesEveryContextUse: a cancel frame is seen by a
// handler that polls ctx.Err() without ever calling Done, by one that
// waits on Done, and by a context derived from the handler's.
func TestCancelFrameReachesEveryContextUse(t *testing.T) {
	var running atomic.Int64
	srv := server.New()
	srv.RegisterFunction("S", "Poll", func(ctx context.Context, in *Msg, out *Msg) error {
		running.Add(1)
		defer running.Add(-1)
		for ctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
		if ctx.Err() != context.Canceled {
			t.Errorf("Err after cancel = %v", ctx.Err())
		}
		return nil
	})
	srv.RegisterFunction("S", "Derived", func(ctx context.Context, in *Msg, out *Msg) error {
		running.Add(1)
		defer running.Add(-1)
		d, cancel := context.WithTimeout(ctx, time.Hour)
		defer cancel()
		<-d.Done()
		return nil
	})
	c := dial(t, testutil.Serve(t, srv))
	waitFor(t, "hello answered", func() bool { return c.Capabilities()&protocol.CapCancel != 0 })
	ctx, cancel := context.WithCancel(context.Background())
	calls := []*client.Call{
		c.Go(ctx, "S", "Poll", &Msg{}, &Msg{}, nil),
		c.Go(ctx, "S", "Derived", &Msg{}, &Msg{}, nil),
	}
	waitFor(t, "handlers running", func() bool { return running.Load() == 2 })
	cancel()
	for _, call := range calls {
		<-call.Done
	}
	waitFor(t, "handlers ended", func() bool { return running.Load() == 0 })
}
