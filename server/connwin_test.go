package server_test

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/internal/testutil"
	"github.com/fleetrpc/fleet/protocol"
	"github.com/fleetrpc/fleet/server"
)

// TestConnWindowStreamLargerThanWindow: with 4 KiB connection windows on
// both sides, streams that move many times the window in each direction
// (many small messages, and messages larger than the window) complete
// fully and in order.
func TestConnWindowStreamLargerThanWindow(t *testing.T) {
	const win = 4 << 10
	srv := server.New(server.WithConnWindow(win))
	if err := server.HandleServerStream(srv, "S", "Chunks", func(ctx context.Context, req *Count, st *server.ServerStream[Chunk]) error {
		data := make([]byte, 10<<10)
		for i := 0; i < req.N; i++ {
			data[i%len(data)] = byte(i)
			if err := st.Send(&Chunk{I: i, Data: data}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := server.HandleClientStream(srv, "S", "Sum", func(ctx context.Context, st *server.ClientStream[Chunk]) (*Count, error) {
		n := 0
		for st.Receive() {
			if st.Msg().I != n || len(st.Msg().Data) != 10<<10 {
				return nil, fleet.Errorf(fleet.DataLoss, "message %d is %d (%d bytes)", n, st.Msg().I, len(st.Msg().Data))
			}
			n++
		}
		return &Count{n}, st.Err()
	}); err != nil {
		t.Fatal(err)
	}
	addr := testutil.Serve(t, srv)
	c := dial(t, addr, client.WithConnWindow(win))
	ctx := context.Background()

	// Server to client: 200 x 10 KiB through a 4 KiB connection window.
	const n = 200
	st, err := client.CallServerStream[Count, Chunk](ctx, c, "S", "Chunks", &Count{n})
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for st.Receive() {
		m := st.Msg()
		if m.I != got || len(m.Data) != 10<<10 || m.Data[got%len(m.Data)] != byte(got) {
			t.Fatalf("message %d is %d (%d bytes)", got, m.I, len(m.Data))
		}
		got++
	}
	if err := st.Err(); err != nil || got != n {
		t.Fatalf("received %d of %d, err %v", got, n, err)
	}
	st.Close()

	// Client to server, the same.
	cs, err := client.CallClientStream[Chunk, Count](ctx, c, "S", "Sum")
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 10<<10)
	for i := 0; i < n; i++ {
		if err := cs.Send(&Chunk{I: i, Data: data}); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	res, err := cs.CloseAndReceive()
	if err != nil || res.N != n {
		t.Fatalf("server counted %+v, err %v", res, err)
	}

	// Many small messages, both ways at once, on the shared window.
	addr2, _, _ := streamServer(t, server.WithConnWindow(win))
	c2 := dial(t, addr2, client.WithConnWindow(win))
	rs, err := client.CallServerStream[Count, Count](ctx, c2, "S", "Range", &Count{20000})
	if err != nil {
		t.Fatal(err)
	}
	bs, err := client.CallBidiStream[Count, Count](ctx, c2, "S", "Echo")
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		for i := 0; i < 2000; i++ {
			if err := bs.Send(&Count{i}); err != nil {
				errc <- err
				return
			}
		}
		errc <- bs.CloseRequest()
	}()
	for i := 0; i < 2000; i++ {
		m, err := bs.Receive()
		if err != nil || m.N != 2*i {
			t.Fatalf("echo %d: %+v %v", i, m, err)
		}
	}
	if m, err := bs.Receive(); err != nil || m.N != -2000 {
		t.Fatalf("echo count: %+v %v", m, err)
	}
	if _, err := bs.Receive(); err != io.EOF {
		t.Fatalf("echo end: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	got = 0
	for rs.Receive() {
		if rs.Msg().N != got {
			t.Fatalf("range message %d is %d", got, rs.Msg().N)
		}
		got++
	}
	if err := rs.Err(); err != nil || got != 20000 {
		t.Fatalf("range received %d, err %v", got, err)
	}
}

// TestConnWindowStalledStreamDoesNotBlockOthers: a consumer that stops
// reading one stream holds back only that stream: the connection window
// (8 KiB here) is granted when the client's read loop accepts data, so
// the stalled stream's producer fills its own 256 KiB stream window, far
// past the connection window, and another stream on the same connection
// completes.
func TestConnWindowStalledStreamDoesNotBlockOthers(t *testing.T) {
	const win, chunk = 8 << 10, 4 << 10
	addr, running, sent := streamServer(t, server.WithConnWindow(win))
	c := dial(t, addr, client.WithConnWindow(win))
	ctx := context.Background()
	stalled, err := client.CallServerStream[Count, Chunk](ctx, c, "S", "Flood", &Count{chunk})
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	if !stalled.Receive() {
		t.Fatal(stalled.Err())
	}
	// The producer gets far past the connection window although nobody
	// consumes: only its stream window (256 KiB) holds it back.
	waitFor(t, "stalled stream sent 16 connection windows", func() bool { return sent.Load() >= 16*win })
	receiveRange(t, ctx, c, 5000) // the second stream
	if b := stalled.Buffered(); b > server.DefaultStreamWindow+chunk*2 {
		t.Fatalf("stalled stream buffers %d bytes, stream window %d", b, server.DefaultStreamWindow)
	}
	stalled.Close()
	waitFor(t, "producers ended", func() bool { return running.Load() == 0 })
}

// TestConnWindowOldPeer: a client or server that announces no connection
// window (as before this setting) streams with the other as before, both
// directions, and on such a connection a window update for stream id 0
// is ignored like any update for an unknown stream.
func TestConnWindowOldPeer(t *testing.T) {
	for _, tc := range []struct {
		name     string
		srv, cli int
	}{
		{"old client", 4 << 10, -1},
		{"old server", -1, 4 << 10},
		{"both old", -1, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, _, _ := streamServer(t, server.WithConnWindow(tc.srv), server.WithLogger(discardLogger()))
			c := dial(t, addr, client.WithConnWindow(tc.cli))
			ctx := context.Background()
			receiveRange(t, ctx, c, 20000)
			if c.Capabilities()&protocol.CapStreams == 0 {
				t.Fatal("streams not negotiated")
			}
			cs, err := client.CallClientStream[Count, Count](ctx, c, "S", "Sum")
			if err != nil {
				t.Fatal(err)
			}
			for i := 1; i <= 5000; i++ {
				if err := cs.Send(&Count{i}); err != nil {
					t.Fatal(err)
				}
			}
			if res, err := cs.CloseAndReceive(); err != nil || res.N != 5000*5001/2 {
				t.Fatalf("sum %+v %v", res, err)
			}
			// A raw client of the same kind: no connection window
			// announced, so a (bad) update for stream id 0 is ignored.
			if tc.cli < 0 {
				rc := dialRaw(t, addr)
				rc.write(protocol.AppendControl(nil, protocol.TypePing, protocol.FlagHello, 0, rawHello(0)))
				if h, _, err := rc.next(); err != nil || h.Type != protocol.TypePong {
					t.Fatalf("%+v %v", h, err)
				}
				rc.write(protocol.AppendControl(nil, protocol.TypeWindowUpdate, 0, 0, []byte{0, 0, 0, 0}))
				rc.request(9, "alive")
				if h, _, err := rc.next(); err != nil || h.Type != protocol.TypeResponse || h.Seq != 9 {
					t.Fatalf("after an update for stream 0 without a connection window: %+v %v", h, err)
				}
			}
		})
	}
}

// rawHello is a revision 2 client Hello with streams, a 1 MiB stream
// window and, when connWin > 0, a connection window.
func rawHello(connWin uint64) []byte {
	s := map[uint64]uint64{protocol.SettingStreamWindow: 1 << 20}
	if connWin > 0 {
		s[protocol.SettingConnWindow] = connWin
	}
	return protocol.AppendHello(nil, &protocol.Hello{Revision: protocol.Revision, Capabilities: protocol.CapCancel | protocol.CapStreams, Settings: s})
}

// TestConnWindowBoundsServerSender: a raw client announcing a 16 KiB
// connection window (and a 1 MiB stream window) reads a flood without
// granting: the server never has more bytes outstanding than the
// connection window allows (max(window, window/2 + one message)); after a
// connection window update (stream id 0) it sends again, within the same
// bound.
func TestConnWindowBoundsServerSender(t *testing.T) {
	const win = 16 << 10
	addr, running, _ := streamServer(t)
	rc := dialRaw(t, addr)
	rc.write(protocol.AppendControl(nil, protocol.TypePing, protocol.FlagHello, 0, rawHello(win)))
	if h, _, err := rc.next(); err != nil || h.Type != protocol.TypePong {
		t.Fatalf("%+v %v", h, err)
	}
	open, _ := protocol.AppendFrame(nil, &protocol.Header{Type: protocol.TypeStreamOpen, Codec: byte(codec.JSON), Seq: 5}, "S", "Flood", nil, nil, 0)
	rc.write(open)
	req, _ := protocol.AppendFrame(nil, &protocol.Header{Type: protocol.TypeStreamData, Codec: byte(codec.JSON), Seq: 5}, "", "", nil, []byte(`{"N":1000}`), 0)
	rc.write(req)
	rc.write(protocol.AppendControl(nil, protocol.TypeStreamData, protocol.FlagEndStream, 5, nil))

	var outstanding, largest int64
	bound := func() int64 { return max(win, win/2+largest) }
	// read reads frames until the unary response seq arrives (when seq >
	// 0) or until at least until bytes are outstanding, checking the
	// bound at every data frame.
	read := func(until int64, seq uint64) {
		t.Helper()
		for {
			h, p, err := rc.next()
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			switch {
			case h.Type == protocol.TypeStreamData && h.Seq == 5:
				outstanding += int64(len(p))
				largest = max(largest, int64(len(p)))
				if outstanding > bound() {
					t.Fatalf("server has %d bytes outstanding on a %d-byte connection window", outstanding, win)
				}
				if seq == 0 && outstanding >= until {
					return
				}
			case h.Type == protocol.TypeResponse && h.Seq == seq:
				return
			case h.Type == protocol.TypeStreamEnd:
				t.Fatalf("stream ended: %+v %q", h, p)
			}
		}
	}
	read(win/2, 0)
	// A unary round trip gives the producer time to overrun, were it
	// going to; it must not.
	rc.request(6, "x")
	read(0, 6)
	first := outstanding
	rc.write(protocol.AppendControl(nil, protocol.TypeWindowUpdate, 0, 0, protocol.AppendWindowUpdate(nil, uint32(outstanding))))
	outstanding = 0
	read(win/2, 0)
	rc.request(7, "x")
	read(0, 7)
	if first < win/2 || outstanding < win/2 {
		t.Fatalf("outstanding %d then %d", first, outstanding)
	}
	rc.nc.Close()
	waitFor(t, "producer ended with the connection", func() bool { return running.Load() == 0 })
}

// TestConnWindowBadUpdateIsProtocolError: on a connection with a
// connection window, a malformed connection window update (increment 0)
// gets a go-away with reason protocol error and the close; the server
// serves other connections on.
func TestConnWindowBadUpdateIsProtocolError(t *testing.T) {
	addr, _, _ := streamServer(t, server.WithLogger(discardLogger()))
	rc := dialRaw(t, addr)
	rc.write(protocol.AppendControl(nil, protocol.TypePing, protocol.FlagHello, 0, rawHello(64<<10)))
	if h, _, err := rc.next(); err != nil || h.Type != protocol.TypePong {
		t.Fatalf("%+v %v", h, err)
	}
	rc.write(protocol.AppendControl(nil, protocol.TypeWindowUpdate, 0, 0, []byte{0, 0, 0, 0}))
	h, p, err := rc.next()
	if err != nil || h.Type != protocol.TypeGoAway {
		t.Fatalf("want go-away, got %+v %v", h, err)
	}
	if g, err := protocol.ParseGoAway(p); err != nil || g.Reason != protocol.GoAwayProtocolError || !strings.Contains(g.Message, "window") {
		t.Fatalf("go-away %+v %v", g, err)
	}
	if _, _, err := rc.next(); err == nil {
		t.Fatal("connection not closed after the go-away")
	}
	c := dial(t, addr)
	st, err := client.CallServerStream[Count, Count](context.Background(), c, "S", "Range", &Count{100})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for st.Receive() {
		n++
	}
	if err := st.Err(); err != nil || n != 100 {
		t.Fatalf("other connection received %d, err %v", n, err)
	}
}
