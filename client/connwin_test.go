package client_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/protocol"
)

// TestClientConnWindowBoundsSender: a raw server announcing a 16 KiB
// connection window (and a 1 MiB stream window) grants connection credit
// only when the test makes a unary call; a client streaming 200 KiB never
// has more payload bytes outstanding than the window allows
// (max(window, window/2 + one message)), and the whole stream arrives.
func TestClientConnWindowBoundsSender(t *testing.T) {
	const win, n = 16 << 10, 200
	msg := strings.Repeat("x", 1000)
	var ungranted, worst, received atomic.Int64
	addr := rawFrameServer(t, func(f protocol.Frame) ([]byte, bool) {
		var out []byte
		switch f.Type {
		case protocol.TypePing:
			h := protocol.AppendHello(nil, &protocol.Hello{
				Revision: protocol.Revision, Capabilities: protocol.CapCancel | protocol.CapStreams,
				Settings: map[uint64]uint64{protocol.SettingStreamWindow: 1 << 20, protocol.SettingConnWindow: win},
			})
			out = protocol.AppendControl(nil, protocol.TypePong, protocol.FlagHello, f.Seq, h)
		case protocol.TypeRequest:
			// Grant the connection credit held back so far, then answer.
			if g := ungranted.Swap(0); g > 0 {
				out = protocol.AppendControl(nil, protocol.TypeWindowUpdate, 0, 0, protocol.AppendWindowUpdate(nil, uint32(g)))
			}
			out, _ = protocol.AppendFrame(out, &protocol.Header{Type: protocol.TypeResponse, Codec: f.Codec, Seq: f.Seq}, "", "", nil, f.Payload, 0)
		case protocol.TypeStreamData:
			if f.Flags&protocol.FlagEndStream != 0 {
				// The payload is in the stream's codec (JSON, as the
				// client dialled with WithCodec(1)); the half-close
				// frame f carries none.
				out, _ = protocol.AppendFrame(nil, &protocol.Header{Type: protocol.TypeStreamData, Codec: 1, Seq: f.Seq}, "", "", nil, []byte("200"), 0)
				out, _ = protocol.AppendFrame(out, &protocol.Header{Type: protocol.TypeStreamEnd, Seq: f.Seq}, "", "", nil, nil, 0)
				break
			}
			p := int64(len(f.Payload))
			received.Add(p)
			if u := ungranted.Add(p); u > worst.Load() {
				worst.Store(u)
			}
		}
		return out, false
	})
	c, err := client.Dial(context.Background(), "tcp", addr, client.WithCodec(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	st, err := client.CallClientStream[string, int](ctx, c, "S", "Up")
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	var done atomic.Bool
	go func() {
		defer done.Store(true)
		for i := 0; i < n; i++ {
			if err := st.Send(&msg); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	// Grant (through a unary round trip) whenever the sender may be
	// stopped: it stops only with more than half the window outstanding.
	deadline := time.Now().Add(30 * time.Second)
	for !done.Load() {
		if time.Now().After(deadline) {
			t.Fatalf("sender stuck: %d bytes received", received.Load())
		}
		if ungranted.Load() >= win/2 {
			var out string
			if err := c.Call(ctx, "U", "Echo", "x", &out); err != nil {
				t.Fatal(err)
			}
			continue
		}
		time.Sleep(time.Millisecond)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	res, err := st.CloseAndReceive()
	if err != nil || *res != 200 {
		t.Fatalf("close: %v %v", res, err)
	}
	if want := int64(n * (len(msg) + 2)); received.Load() != want {
		t.Fatalf("server received %d bytes, want %d", received.Load(), want)
	}
	if w, bound := worst.Load(), int64(max(win, win/2+len(msg)+2)); w > bound {
		t.Fatalf("client had %d bytes outstanding on a %d-byte connection window (bound %d)", w, win, bound)
	}
}
