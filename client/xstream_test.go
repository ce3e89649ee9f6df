package client_test

import (
	"context"
	"net"
	"testing"

	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/server"
)

// TestXClientStreamFailover: with one server down and one serving, every
// stream opens (on the live one) whichever the selector picks first.
func TestXClientStreamFailover(t *testing.T) {
	live := startNode(t, "live", nil)
	if err := server.HandleServerStream(live.srv, "Echo", "Feed", func(ctx context.Context, req *Req, st *server.ServerStream[Rep]) error {
		for i := 0; i < req.N; i++ {
			if err := st.Send(&Rep{From: "live"}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := lis.Addr().String()
	lis.Close() // nothing listens there any more
	tab, reg := newTable(t, live)
	if err := reg.Register(context.Background(), registry.Instance{Service: "Echo", Addr: deadAddr, Weight: 1}); err != nil {
		t.Fatal(err)
	}
	x := newX(t, tab, client.WithFailMode(client.Failfast))
	for i := 0; i < 10; i++ {
		st, err := client.XCallServerStream[Req, Rep](context.Background(), x, "Feed", &Req{N: 3})
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		n := 0
		for st.Receive() {
			n++
		}
		st.Close()
		if n != 3 || st.Err() != nil {
			t.Fatalf("stream %d: %d messages, %v", i, n, st.Err())
		}
	}
}
