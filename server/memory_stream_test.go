package server_test

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/server"
)

// TestStreamMessagesStayWithinBudget opens 100 client streams on one
// connection and sends one message of almost 4 MiB on each (allowed by
// the flow-control rule "one message of any size while at most half the
// window is outstanding") to handlers that do not read them. The queued
// messages are charged to the connection's memory budget (64 MiB by
// default): the streams whose message does not fit fail with
// ResourceExhausted, and the server's heap grows by at most twice the
// budget. Once the handlers read, every queued message is delivered.
func TestStreamMessagesStayWithinBudget(t *testing.T) {
	const (
		streams = 100
		msgSize = 4<<20 - 4<<10
		budget  = 64 << 20 // the default of WithMaxPendingBytesPerConn
	)
	release := make(chan struct{})
	var received atomic.Int64
	srv := server.New()
	if err := server.HandleClientStream(srv, "Flood", "Take", func(ctx context.Context, st *server.ClientStream[[]byte]) (*[]byte, error) {
		select {
		case <-release:
		case <-ctx.Done():
			return nil, fleet.FromContextError(ctx.Err())
		}
		for st.Receive() {
			received.Add(1)
		}
		return new([]byte), st.Err()
	}); err != nil {
		t.Fatal(err)
	}
	srv.RegisterFunction("Flood", "Ping", func(ctx context.Context, in *[]byte, out *[]byte) error { return nil })
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	defer srv.Close()
	c, err := client.Dial(context.Background(), "tcp", lis.Addr().String(), client.WithCodec(codec.Raw))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	payload, payload0 := make([]byte, msgSize), []byte{}
	before := heapInuse()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sts := make([]*client.ClientStreamForClient[[]byte, []byte], streams)
	for i := range sts {
		st, err := client.CallClientStream[[]byte, []byte](ctx, c, "Flood", "Take")
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Send(&payload); err != nil {
			t.Fatalf("stream %d: send: %v", i, err)
		}
		sts[i] = st
	}
	// The server reads a connection's frames in order: once a call sent
	// after the messages is answered, each message is queued or refused.
	if err := c.Call(ctx, "Flood", "Ping", &payload0, new([]byte)); err != nil {
		t.Fatalf("ping behind the messages: %v", err)
	}
	grew := int64(heapInuse()) - int64(before)
	t.Logf("heap grew by %d MiB with %d streams of one %d-byte message", grew>>20, streams, msgSize)
	if grew > 2*budget {
		t.Errorf("heap grew by %d bytes, want at most %d (twice the connection's budget)", grew, 2*budget)
	}

	close(release)
	var wg sync.WaitGroup
	var ok, exhausted atomic.Int64
	for i, st := range sts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := st.CloseAndReceive()
			switch fleet.CodeOf(err) {
			case fleet.OK:
				ok.Add(1)
			case fleet.ResourceExhausted:
				exhausted.Add(1)
			default:
				t.Errorf("stream %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	t.Logf("%d streams delivered their message, %d were refused", ok.Load(), exhausted.Load())
	if ok.Load() == 0 || exhausted.Load() == 0 {
		t.Errorf("%d delivered, %d refused: want both (the budget holds about %d messages)", ok.Load(), exhausted.Load(), budget/msgSize)
	}
	if received.Load() != ok.Load() {
		t.Errorf("handlers received %d messages, want %d", received.Load(), ok.Load())
	}
}
