package server_test

import (
	"context"
	"io"
	"testing"

	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/internal/testutil"
	"github.com/fleetrpc/fleet/server"
)

// Numbers has one method of each streaming form and one that is not.
type Numbers struct{}

func (Numbers) Count(ctx context.Context, req *Count, st *server.ServerStream[Count]) error {
	for i := 0; i < req.N; i++ {
		if err := st.Send(&Count{i}); err != nil {
			return err
		}
	}
	return nil
}

func (Numbers) Total(ctx context.Context, st *server.ClientStream[Count]) (*Count, error) {
	t := 0
	for st.Receive() {
		t += st.Msg().N
	}
	return &Count{t}, st.Err()
}

func (Numbers) Double(ctx context.Context, st *server.BidiStream[Count, Count]) error {
	for {
		m, err := st.Receive()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := st.Send(&Count{2 * m.N}); err != nil {
			return err
		}
	}
}

func (Numbers) Helper(n int) int { return n }

func TestRegisterStreams(t *testing.T) {
	srv := server.New()
	if err := srv.RegisterStreams("", Numbers{}); err != nil {
		t.Fatal(err)
	}
	if err := srv.RegisterStreams("", Numbers{}); err == nil {
		t.Fatal("registered twice")
	}
	if err := srv.RegisterStreams("X", new(Arith)); err == nil {
		t.Fatal("type without streaming methods accepted")
	}
	c := dial(t, testutil.Serve(t, srv))
	ctx := context.Background()

	ss, err := client.CallServerStream[Count, Count](ctx, c, "Numbers", "Count", &Count{5})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for ss.Receive() {
		n++
	}
	ss.Close()
	if n != 5 || ss.Err() != nil {
		t.Fatalf("Count: %d, %v", n, ss.Err())
	}

	cs, err := client.CallClientStream[Count, Count](ctx, c, "Numbers", "Total")
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 4; i++ {
		cs.Send(&Count{i})
	}
	if res, err := cs.CloseAndReceive(); err != nil || res.N != 10 {
		t.Fatalf("Total: %v, %v", res, err)
	}

	bs, err := client.CallBidiStream[Count, Count](ctx, c, "Numbers", "Double")
	if err != nil {
		t.Fatal(err)
	}
	defer bs.Close()
	bs.Send(&Count{21})
	if m, err := bs.Receive(); err != nil || m.N != 42 {
		t.Fatalf("Double: %v, %v", m, err)
	}
	bs.CloseRequest()
	if _, err := bs.Receive(); err != io.EOF {
		t.Fatalf("Double end: %v", err)
	}
}
