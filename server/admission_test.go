package server_test

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/internal/bufpool"
	"github.com/fleetrpc/fleet/internal/testutil"
	"github.com/fleetrpc/fleet/protocol"
	"github.com/fleetrpc/fleet/server"
)

func echoServer(t *testing.T, opts ...server.Option) (*server.Server, string) {
	t.Helper()
	srv := server.New(opts...)
	srv.RegisterFunction("A", "Echo", func(ctx context.Context, in *[]byte, out *[]byte) error {
		*out = *in
		return nil
	})
	return srv, testutil.Serve(t, srv)
}

// refusedOrServed dials from local (nil: any) and reports whether the
// server refused the connection (a go-away, then the end of the stream)
// or served a call on it. A served connection is returned open.
func refusedOrServed(t *testing.T, addr string, local net.Addr) (*hostileConn, bool) {
	t.Helper()
	d := net.Dialer{LocalAddr: local}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	rc := &hostileConn{t: t, nc: nc, r: protocol.NewReader(nc, 0, protocol.Limits{})}
	if _, err := nc.Write(request(1, 0, 0, "A", "Echo", nil, []byte("x"))); err != nil {
		return rc, true // closed before we wrote: refused
	}
	nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	f, buf, err := rc.r.ReadFrame()
	if err != nil {
		// Closed without an answer: the go-away may be lost to a reset
		// when the server closed with our request unread.
		if errors.Is(err, io.EOF) || isReset(err) {
			return rc, true
		}
		t.Fatalf("no answer and no go-away: %v", err)
	}
	bufpool.Put(buf)
	switch f.Type {
	case protocol.TypeResponse:
		if fleet.Code(f.Status) != fleet.OK {
			t.Fatalf("call failed: %v", fleet.Code(f.Status))
		}
		return rc, false
	case protocol.TypeGoAway:
		if _, _, err := rc.r.ReadFrame(); !errors.Is(err, io.EOF) && !isReset(err) {
			t.Fatalf("after the go-away: %v, want the end of the stream", err)
		}
		return rc, true
	}
	t.Fatalf("unexpected frame type %d", f.Type)
	return nil, false
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout()
}

// TestConnectionLimits: over the total cap, and over the per-IP cap, a new
// connection gets a go-away and is closed, and is counted; closing an
// admitted connection makes room again; another IP has its own count.
func TestConnectionLimits(t *testing.T) {
	t.Run("total", func(t *testing.T) {
		srv, addr := echoServer(t, server.WithMaxConns(3))
		var open []*hostileConn
		for range 3 {
			rc, refused := refusedOrServed(t, addr, nil)
			if refused {
				t.Fatal("a connection under the cap was refused")
			}
			open = append(open, rc)
		}
		if _, refused := refusedOrServed(t, addr, nil); !refused {
			t.Fatal("a fourth connection was served over a cap of 3")
		}
		if n := srv.RefusedConns(); n != 1 {
			t.Fatalf("RefusedConns = %d, want 1", n)
		}
		open[0].nc.Close()
		// The server notices the close asynchronously: poll.
		deadline := time.Now().Add(20 * time.Second)
		for {
			if _, refused := refusedOrServed(t, addr, nil); !refused {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("no room after an admitted connection closed")
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	t.Run("per IP", func(t *testing.T) {
		srv, addr := echoServer(t, server.WithMaxConnsPerIP(2))
		for range 2 {
			if _, refused := refusedOrServed(t, addr, nil); refused {
				t.Fatal("a connection under the per-IP cap was refused")
			}
		}
		if _, refused := refusedOrServed(t, addr, nil); !refused {
			t.Fatal("a third connection from 127.0.0.1 was served over a cap of 2")
		}
		// 127.0.0.2 is another loopback address with its own count.
		if _, refused := refusedOrServed(t, addr, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}); refused {
			t.Fatal("a connection from 127.0.0.2 was refused by 127.0.0.1's count")
		}
		if n := srv.RefusedConns(); n != 1 {
			t.Fatalf("RefusedConns = %d, want 1", n)
		}
	})
}

// TestFrameReadTimeout: a frame that trickles in is cut after the
// frame-read timeout, although the idle timeout is long; a connection that
// stays idle longer than the frame-read timeout and then sends a whole
// frame is served.
func TestFrameReadTimeout(t *testing.T) {
	const ft = 200 * time.Millisecond
	_, addr := echoServer(t, server.WithFrameReadTimeout(ft), server.WithIdleTimeout(time.Minute))

	idle := dialHostile(t, addr)
	trickler := dialHostile(t, addr)
	frame := request(1, 0, 0, "A", "Echo", nil, []byte("never finished"))
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for i := 0; i < len(frame)-1; i++ {
			if _, err := trickler.nc.Write(frame[i : i+1]); err != nil {
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	trickler.nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, _, err := trickler.r.ReadFrame(); err == nil || (!errors.Is(err, io.EOF) && !isReset(err)) {
		t.Fatalf("trickling peer: %v, want its connection closed", err)
	}

	// The idle connection has waited at least as long as the trickle
	// took to be cut, well over the frame-read timeout.
	if got := idle.roundTrip(request(2, 0, 0, "A", "Echo", nil, []byte("x"))); got != fleet.OK {
		t.Fatalf("idle connection: %v", got)
	}
}
