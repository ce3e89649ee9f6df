package server

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/fleetrpc/fleet/client"
)

// TestInlineSetEmptiesWhenIdle: connections leave the inline monitor's set
// once their serial calls stop, and the monitor stops, so neither a scan
// over idle connections nor a ticker is left behind; the next serial call
// starts both again.
func TestInlineSetEmptiesWhenIdle(t *testing.T) {
	s := New()
	if err := Handle(s, "Inline", "Nop", func(ctx context.Context, _ *int, _ *int) error { return nil }); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(lis)
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var cs []*client.Client
	for range 3 {
		c, err := client.Dial(ctx, "tcp", lis.Addr().String(), client.WithHeartbeat(0))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		cs = append(cs, c)
	}
	state := func() (conns int, running bool) {
		s.inlineMu.Lock()
		defer s.inlineMu.Unlock()
		return len(s.inlineConns), s.inlineMon.Load()
	}
	for round := range 2 {
		seen := 0 // the most connections seen in the set between calls
		for _, c := range cs {
			for range 5 {
				if err := c.Call(ctx, "Inline", "Nop", 0, new(int)); err != nil {
					t.Fatal(err)
				}
				n, _ := state()
				seen = max(seen, n)
			}
		}
		if seen == 0 {
			t.Fatalf("round %d: no connection was in the set during serial calls", round)
		}
		for {
			if n, running := state(); n == 0 && !running {
				break
			}
			select {
			case <-ctx.Done():
				n, running := state()
				t.Fatalf("round %d: %d connections still in the set, monitor running %v", round, n, running)
			case <-time.After(time.Millisecond):
			}
		}
	}
}
