package client_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/protocol"
)

// oldServer is a revision 1 server as the previous release behaved: it
// answers pings with plain pongs, answers requests with status 0 echoing
// the payload (or never, for method "Hang"), and closes the connection on
// any frame type it does not know.
func oldServer(t *testing.T) (addr string, unknown *atomic.Int64) {
	unknown = new(atomic.Int64)
	addr = rawFrameServer(t, func(f protocol.Frame) ([]byte, bool) {
		switch f.Type {
		case protocol.TypePing:
			return protocol.AppendControl(nil, protocol.TypePong, 0, f.Seq, nil), false
		case protocol.TypeRequest:
			if string(f.Method) == "Hang" {
				return nil, false
			}
			out, _ := protocol.AppendFrame(nil, &protocol.Header{Type: protocol.TypeResponse, Codec: f.Codec, Seq: f.Seq}, "", "", nil, f.Payload, 0)
			return out, false
		case protocol.TypeResponse, protocol.TypePong, protocol.TypeGoAway:
			return nil, false
		}
		unknown.Add(1)
		return nil, true // revision 1: an unknown type closes the connection
	})
	return addr, unknown
}

// TestRevision1ServerFallback: against a revision 1 server the client
// announces its Hello, sees a plain pong, uses no capability, and a
// cancelled call sends no cancel frame (which would break the connection).
func TestRevision1ServerFallback(t *testing.T) {
	addr, unknown := oldServer(t)
	c, err := client.Dial(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out string
	if err := c.Call(context.Background(), "S", "Echo", "hi", &out); err != nil || out != "hi" {
		t.Fatalf("call: %q %v", out, err)
	}
	if caps := c.Capabilities(); caps != 0 {
		t.Fatalf("capabilities with a revision 1 server: %b", caps)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	err = c.Call(ctx, "S", "Hang", "x", &out)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) && fleet.CodeOf(err) != fleet.DeadlineExceeded {
		t.Fatalf("hanging call: %v", err)
	}
	if err := c.Call(context.Background(), "S", "Echo", "again", &out); err != nil || out != "again" {
		t.Fatalf("call after cancel: %q %v", out, err)
	}
	if n := unknown.Load(); n != 0 {
		t.Fatalf("client sent %d frames a revision 1 server does not know", n)
	}
}

// TestStreamAgainstRevision1Server: opening a stream on a server without
// streams fails with Unimplemented before anything is sent.
func TestStreamAgainstRevision1Server(t *testing.T) {
	addr, unknown := oldServer(t)
	c, err := client.Dial(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = client.CallServerStream[string, string](context.Background(), c, "S", "Range", new(string))
	if fleet.CodeOf(err) != fleet.Unimplemented || !errors.Is(err, client.ErrStreamsUnsupported) || !errors.Is(err, client.ErrNotSent) {
		t.Fatalf("err = %v", err)
	}
	var out string
	if err := c.Call(context.Background(), "S", "Echo", "still", &out); err != nil || out != "still" {
		t.Fatalf("call: %q %v", out, err)
	}
	if n := unknown.Load(); n != 0 {
		t.Fatalf("%d unknown frames sent", n)
	}
}
