package server_test

import (
	"context"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/internal/testutil"
	"github.com/fleetrpc/fleet/server"
)

// onReadLoop reports whether the calling goroutine is a connection's read
// loop: the lone call ran inline.
func onReadLoop() bool {
	buf := make([]byte, 16<<10)
	return strings.Contains(string(buf[:runtime.Stack(buf, false)]), "server.(*conn).readLoop")
}

// inlineServer serves Inline.Where (it reports whether it ran on the read
// loop), Inline.Block (it signals started, then waits for a Release or for
// its context to end, and reports which on ended) and Inline.Release.
func inlineServer(t *testing.T, opts ...server.Option) (srv *server.Server, started chan struct{}, ended chan string) {
	t.Helper()
	srv = server.New(opts...)
	started, ended = make(chan struct{}, 1), make(chan string, 4)
	rel := make(chan struct{}, 1)
	report := func(how string) {
		select {
		case ended <- how:
		default: // a test that no longer reads: the connection closed
		}
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(server.Handle(srv, "Inline", "Where", func(ctx context.Context, _ *int, inline *bool) error {
		*inline = onReadLoop()
		return nil
	}))
	must(server.Handle(srv, "Inline", "Block", func(ctx context.Context, _ *int, _ *int) error {
		started <- struct{}{}
		select {
		case <-rel:
			report("released")
		case <-ctx.Done():
			report("cancelled")
			return ctx.Err()
		}
		return nil
	}))
	must(server.Handle(srv, "Inline", "Release", func(ctx context.Context, _ *int, _ *int) error {
		select {
		case rel <- struct{}{}:
		default:
		}
		return nil
	}))
	return srv, started, ended
}

// TestInlineLoneCall: a serial caller's call (the client marks it
// protocol.FlagSole), the connection's only one, runs on the read loop;
// calls made while another is outstanding do not.
func TestInlineLoneCall(t *testing.T) {
	srv, started, _ := inlineServer(t)
	c := dial(t, testutil.Serve(t, srv), client.WithHeartbeat(0))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var inline bool
	if err := c.Call(ctx, "Inline", "Where", 0, &inline); err != nil { // warm-up
		t.Fatal(err)
	}
	for i := range 20 {
		if err := c.Call(ctx, "Inline", "Where", 0, &inline); err != nil {
			t.Fatal(err)
		}
		if !inline {
			t.Fatalf("serial call %d did not run on the read loop", i)
		}
	}
	// Calls while another call runs (it blocks: inline, then handed off)
	// run on handler goroutines.
	done := make(chan error, 1)
	go func() { done <- c.Call(ctx, "Inline", "Block", 0, new(int)) }()
	<-started
	var off atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var inline bool
			if err := c.Call(ctx, "Inline", "Where", 0, &inline); err != nil {
				t.Error(err)
			}
			if !inline {
				off.Add(1)
			}
		}()
	}
	wg.Wait()
	if err := c.Call(ctx, "Inline", "Release", 0, new(int)); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := off.Load(); n != 8 {
		t.Fatalf("%d of 8 calls ran on a handler goroutine while another call was running, want all", n)
	}
}

// TestInlineSlowCallHandsOffReading: a lone call that blocks on the read
// loop does not stop the connection's reading: the call that releases it
// (on the same connection) is read and answered, and so is a cancel frame
// for a blocked call.
func TestInlineSlowCallHandsOffReading(t *testing.T) {
	srv, started, ended := inlineServer(t)
	c := dial(t, testutil.Serve(t, srv), client.WithHeartbeat(0))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	done := make(chan error, 1)
	go func() { done <- c.Call(ctx, "Inline", "Block", 0, new(int)) }()
	<-started
	if err := c.Call(ctx, "Inline", "Release", 0, new(int)); err != nil {
		t.Fatalf("Release on the same connection: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Block: %v", err)
	}
	if how := <-ended; how != "released" {
		t.Fatalf("Block ended %s", how)
	}

	// Again, ended by a cancel frame this time.
	bctx, bcancel := context.WithCancel(ctx)
	go func() { done <- c.Call(bctx, "Inline", "Block", 0, new(int)) }()
	<-started
	bcancel()
	if err := <-done; fleet.CodeOf(err) != fleet.Canceled {
		t.Fatalf("cancelled Block: %v, want canceled", err)
	}
	select {
	case how := <-ended:
		if how != "cancelled" {
			t.Fatalf("Block ended %s", how)
		}
	case <-ctx.Done():
		t.Fatal("the cancel frame never reached the blocked call")
	}
	// The connection still works, serially and inline: once the cancelled
	// call's handler has left (it signals ended just before), a lone call
	// runs on the read loop again.
	var inline bool
	for i := 0; i < 200 && !inline; i++ {
		if err := c.Call(ctx, "Inline", "Where", 0, &inline); err != nil {
			t.Fatal(err)
		}
	}
	if !inline {
		t.Fatal("a lone call after the hand-offs did not run on the read loop")
	}
}

// TestInlineServeConnWaits: ServeConn returns when its connection ends,
// also when its read loop was handed to another goroutine.
func TestInlineServeConnWaits(t *testing.T) {
	srv, started, ended := inlineServer(t, server.WithLogger(discardLogger()))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	returned := make(chan struct{})
	go func() {
		nc, err := lis.Accept()
		if err != nil {
			close(returned)
			return
		}
		srv.ServeConn(nc)
		close(returned)
	}()
	c, err := client.Dial(context.Background(), "tcp", lis.Addr().String(), client.WithHeartbeat(0))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var inline bool
	if err := c.Call(ctx, "Inline", "Where", 0, &inline); err != nil {
		t.Fatal(err)
	}
	// Block, a lone call, runs on ServeConn's goroutine; Release can only
	// be read after the read loop was handed to another goroutine.
	done := make(chan error, 1)
	go func() { done <- c.Call(ctx, "Inline", "Block", 0, new(int)) }()
	<-started
	if err := c.Call(ctx, "Inline", "Release", 0, new(int)); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	<-ended
	// ServeConn's goroutine, done with Block, must wait for the new
	// reader rather than return: wait until it does one or the other.
	for !servingWaits() {
		select {
		case <-returned:
			t.Fatal("ServeConn returned while its connection was open")
		case <-ctx.Done():
			t.Fatal("ServeConn's goroutine never waited for the reader it handed over to")
		case <-time.After(time.Millisecond):
		}
	}
	if err := c.Call(ctx, "Inline", "Where", 0, &inline); err != nil {
		t.Fatal(err) // the connection still reads, on the new goroutine
	}
	c.Close()
	<-returned
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

// servingWaits reports whether a goroutine serving a connection
// (Server.serveConn) is blocked on a channel outside its read loop: it
// handed the loop over and waits for the new reader to stop.
func servingWaits() bool {
	buf := make([]byte, 1<<20)
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "[chan receive") && strings.Contains(g, "server.(*Server).serveConn(") &&
			!strings.Contains(g, "server.(*conn).readLoop(") {
			return true
		}
	}
	return false
}
