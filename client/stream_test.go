package client_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/protocol"
)

// misbehavingServer answers the Hello with stream support, and on a
// stream open sends a message for a stream that does not exist, then
// three 700-byte messages on the opened stream (overrunning a 1024-byte
// window), and records the cancel the client sends; requests are echoed.
func misbehavingServer(t *testing.T) (addr string, cancelled chan uint64) {
	cancelled = make(chan uint64, 4)
	addr = rawFrameServer(t, func(f protocol.Frame) ([]byte, bool) {
		var out []byte
		switch f.Type {
		case protocol.TypePing:
			h := protocol.AppendHello(nil, &protocol.Hello{Revision: protocol.Revision, Capabilities: protocol.CapCancel | protocol.CapStreams})
			out = protocol.AppendControl(nil, protocol.TypePong, protocol.FlagHello, f.Seq, h)
		case protocol.TypeRequest:
			out, _ = protocol.AppendFrame(nil, &protocol.Header{Type: protocol.TypeResponse, Codec: f.Codec, Seq: f.Seq}, "", "", nil, f.Payload, 0)
		case protocol.TypeStreamOpen:
			msg := []byte(`"` + strings.Repeat("x", 700) + `"`)
			out, _ = protocol.AppendFrame(nil, &protocol.Header{Type: protocol.TypeStreamData, Codec: f.Codec, Seq: f.Seq + 1000}, "", "", nil, msg, 0)
			for i := 0; i < 3; i++ {
				out, _ = protocol.AppendFrame(out, &protocol.Header{Type: protocol.TypeStreamData, Codec: f.Codec, Seq: f.Seq}, "", "", nil, msg, 0)
			}
			out = protocol.AppendControl(out, 200, 0, f.Seq, []byte("unknown type"))
		case protocol.TypeCancel:
			cancelled <- f.Seq
		}
		return out, false
	})
	return addr, cancelled
}

// TestClientStreamBadInput: data for an unknown stream and a frame of an
// unknown type are ignored; a server that overruns the stream window gets
// the stream cancelled and the caller sees ResourceExhausted; the
// connection serves on.
func TestClientStreamBadInput(t *testing.T) {
	addr, cancelled := misbehavingServer(t)
	c, err := client.Dial(context.Background(), "tcp", addr, client.WithStreamWindow(1024), client.WithCodec(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	in := "go"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := client.CallServerStream[string, string](ctx, c, "S", "Feed", &in)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// Nothing is consumed (so no credit is returned) until the client has
	// cancelled the stream: the second message overruns the window.
	select {
	case seq := <-cancelled:
		if seq == 0 {
			t.Fatal("cancel for stream 0")
		}
	case <-ctx.Done():
		t.Fatal("no cancel sent for the overrun stream")
	}
	for st.Receive() {
	}
	if fleet.CodeOf(st.Err()) != fleet.ResourceExhausted {
		t.Fatalf("overrun stream: %v", st.Err())
	}
	var out string
	if err := c.Call(context.Background(), "S", "Echo", "alive", &out); err != nil || out != "alive" {
		t.Fatalf("call after bad stream input: %q %v", out, err)
	}
}
