package client_test

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/protocol"
	"github.com/fleetrpc/fleet/server"
)

// serialServer serves Echo.Do: N == 1 blocks until the call's context
// ends, N == 2 sleeps 100 ms, anything else answers at once.
func serialServer(t *testing.T, opts ...server.Option) (*server.Server, string) {
	return serialServerOn(t, "tcp", opts...)
}

func serialServerOn(t *testing.T, network string, opts ...server.Option) (*server.Server, string) {
	t.Helper()
	srv := server.New(opts...)
	if err := srv.RegisterFunction("Echo", "Do", func(ctx context.Context, in *Req, out *Rep) error {
		switch in.N {
		case 1:
			<-ctx.Done()
			return ctx.Err()
		case 2:
			time.Sleep(100 * time.Millisecond)
		}
		out.From = "srv"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:0"
	if network == "unix" {
		addr = filepath.Join(t.TempDir(), "s")
	}
	lis, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(lis) }()
	t.Cleanup(func() { srv.Close(); <-done })
	return srv, lis.Addr().String()
}

func serialCall(ctx context.Context, c *client.Client, n int) error {
	var out Rep
	err := c.Call(ctx, "Echo", "Do", &Req{N: n}, &out)
	if err == nil && out.From != "srv" {
		err = errors.New("wrong reply " + out.From)
	}
	return err
}

// TestSerialCallerCancelAndDeadline: a serial call (the one that reads its
// own response) ends at once when its context is cancelled or passes its
// deadline, and the connection serves the next calls, right away and
// after it was left idle, with and without deadlines; over TCP and Unix
// sockets.
func TestSerialCallerCancelAndDeadline(t *testing.T) {
	for _, network := range []string{"tcp", "unix"} {
		t.Run(network, func(t *testing.T) { testSerialCallerCancelAndDeadline(t, network) })
	}
}

func testSerialCallerCancelAndDeadline(t *testing.T, network string) {
	_, addr := serialServerOn(t, network)
	c, err := client.Dial(context.Background(), network, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	bg := context.Background()
	for round := 0; round < 3; round++ {
		for i := 0; i < 20; i++ { // serial calls: the reader is the caller's
			if err := serialCall(bg, c, 0); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithCancel(bg)
		time.AfterFunc(30*time.Millisecond, cancel)
		if err := serialCall(ctx, c, 1); fleet.CodeOf(err) != fleet.Canceled {
			t.Fatalf("round %d: cancelled call: %v", round, err)
		}
		ctx, cancel = context.WithTimeout(bg, 30*time.Millisecond)
		err := serialCall(ctx, c, 1)
		cancel()
		if fleet.CodeOf(err) != fleet.DeadlineExceeded {
			t.Fatalf("round %d: expired call: %v", round, err)
		}
		ctx, cancel = context.WithTimeout(bg, 10*time.Second)
		err = serialCall(ctx, c, 0) // no stale read deadline left behind
		cancel()
		if err != nil {
			t.Fatalf("round %d: call after cancel: %v", round, err)
		}
		time.Sleep(30 * time.Millisecond) // the read loop takes the idle reader back
	}
	if n := c.Pending(); n != 0 {
		t.Fatalf("%d calls pending", n)
	}
}

// TestSerialCallerOverlappingCalls: calls that start while a serial
// caller reads get their responses (the caller delivers them), before and
// after the serial call ends.
func TestSerialCallerOverlappingCalls(t *testing.T) {
	_, addr := serialServer(t)
	c, err := client.Dial(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	bg := context.Background()
	for round := 0; round < 3; round++ {
		if err := serialCall(bg, c, 0); err != nil {
			t.Fatal(err)
		}
		slow := make(chan error, 1)
		go func() { slow <- serialCall(bg, c, 2) }() // reads for itself for 100 ms
		time.Sleep(20 * time.Millisecond)
		fast := c.Go(bg, "Echo", "Do", &Req{}, &Rep{}, nil)
		select {
		case call := <-fast.Done:
			if call.Error != nil || call.Reply.(*Rep).From != "srv" {
				t.Fatalf("fast call: %v %+v", call.Error, call.Reply)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("fast call not delivered while a serial caller reads")
		}
		if err := <-slow; err != nil {
			t.Fatal(err)
		}
		// A sync call overlapping a serial one, its response after.
		go func() { slow <- serialCall(bg, c, 0) }()
		if err := serialCall(bg, c, 2); err != nil {
			t.Fatal(err)
		}
		if err := <-slow; err != nil {
			t.Fatal(err)
		}
		// An async call right after a serial one: the idle reader goes
		// back to the read loop.
		if err := serialCall(bg, c, 0); err != nil {
			t.Fatal(err)
		}
		call := <-c.Go(bg, "Echo", "Do", &Req{}, &Rep{}, nil).Done
		if call.Error != nil {
			t.Fatal(call.Error)
		}
	}
}

// TestSerialCallerConnectionLost: a serial caller reading for itself when
// the server goes away fails with ErrConnectionLost, and so does the
// client.
func TestSerialCallerConnectionLost(t *testing.T) {
	srv, addr := serialServer(t)
	c, err := client.Dial(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := serialCall(context.Background(), c, 0); err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(50*time.Millisecond, func() { srv.Close() })
	if err := serialCall(context.Background(), c, 1); !errors.Is(err, client.ErrConnectionLost) {
		t.Fatalf("call when the server closed: %v", err)
	}
	<-c.Done()
}

// TestSerialCallerIdleConnection: after serial calls, the connection's
// go-away and close are noticed without another call.
func TestSerialCallerIdleConnection(t *testing.T) {
	srv, addr := serialServer(t)
	c, err := client.Dial(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := 0; i < 10; i++ {
		if err := serialCall(context.Background(), c, 0); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go srv.Shutdown(ctx)
	select {
	case <-c.Done():
	case <-ctx.Done():
		t.Fatal("idle client did not notice the server's shutdown")
	}
	if !c.Draining() {
		t.Fatal("go-away not read")
	}
	if err := serialCall(context.Background(), c, 0); !errors.Is(err, client.ErrNotSent) {
		t.Fatalf("call after shutdown: %v", err)
	}
}

// TestSerialCallerFramesOnTheWay: a serial caller reading for itself
// answers pings, ignores responses nobody waits for, gets a response that
// arrives in two pieces (left to the read loop), and a stream opened
// after serial calls gets its frames.
func TestSerialCallerFramesOnTheWay(t *testing.T) {
	var pongs atomic.Int64
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		nc, err := lis.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		r := protocol.NewReader(nc, 0, protocol.Limits{})
		defer r.Close()
		for {
			f, _, err := r.ReadFrame()
			if err != nil {
				return
			}
			var out []byte
			switch f.Type {
			case protocol.TypePing:
				h := protocol.AppendHello(nil, &protocol.Hello{Revision: protocol.Revision, Capabilities: protocol.CapCancel | protocol.CapStreams})
				out = protocol.AppendControl(nil, protocol.TypePong, protocol.FlagHello, f.Seq, h)
			case protocol.TypePong:
				pongs.Add(1)
			case protocol.TypeRequest:
				out = protocol.AppendControl(nil, protocol.TypePing, 0, 7, nil)
				out, _ = protocol.AppendFrame(out, &protocol.Header{Type: protocol.TypeResponse, Codec: f.Codec, Seq: f.Seq + 1000}, "", "", nil, f.Payload, 0)
				n := len(out)
				out, _ = protocol.AppendFrame(out, &protocol.Header{Type: protocol.TypeResponse, Codec: f.Codec, Seq: f.Seq}, "", "", nil, f.Payload, 0)
				if string(f.Payload) == `"split"` {
					nc.Write(out[:n+5])
					time.Sleep(20 * time.Millisecond)
					out = out[n+5:]
				}
			case protocol.TypeStreamOpen:
				out, _ = protocol.AppendFrame(nil, &protocol.Header{Type: protocol.TypeStreamData, Codec: f.Codec, Seq: f.Seq}, "", "", nil, []byte(`"streamed"`), 0)
				out = protocol.AppendControl(out, protocol.TypeStreamEnd, 0, f.Seq, nil)
			}
			nc.Write(out)
		}
	}()
	t.Cleanup(func() { lis.Close(); <-done })

	c, err := client.Dial(context.Background(), "tcp", lis.Addr().String(), client.WithCodec(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, in := range []string{"a", "split", "b", "split", "c"} {
		var out string
		if err := c.Call(ctx, "S", "Echo", in, &out); err != nil || out != in {
			t.Fatalf("call %q: %q %v", in, out, err)
		}
	}
	for pongs.Load() < 5 {
		if ctx.Err() != nil {
			t.Fatalf("%d pongs for 5 pings", pongs.Load())
		}
		time.Sleep(time.Millisecond)
	}
	in := "go"
	st, err := client.CallServerStream[string, string](ctx, c, "S", "Feed", &in)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if !st.Receive() || *st.Msg() != "streamed" {
		t.Fatalf("stream after serial calls: %v", st.Err())
	}
	if st.Receive() || st.Err() != nil {
		t.Fatalf("stream end: %v", st.Err())
	}
	var out string
	if err := c.Call(ctx, "S", "Echo", "d", &out); err != nil || out != "d" {
		t.Fatalf("call after stream: %q %v", out, err)
	}
}
