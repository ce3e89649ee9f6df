package flow_test

import (
	"errors"
	"io"
	"testing"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/internal/bufpool"
	"github.com/fleetrpc/fleet/internal/flow"
	"github.com/fleetrpc/fleet/protocol"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func msg(n int) flow.Msg {
	bp := bufpool.Get(n)
	*bp = (*bp)[:n]
	return flow.Msg{Frame: protocol.Frame{Payload: *bp}, Buf: bp}
}

func TestCredit(t *testing.T) {
	c := flow.NewCredit(100)
	closed := make(chan struct{})
	close(closed)
	if !c.Acquire(60, nil) || c.Available() != 40 {
		t.Fatal("first acquire")
	}
	if c.Acquire(50, closed) {
		t.Fatal("acquired past the credit")
	}
	c.Add(60)
	if !c.Acquire(50, nil) || c.Available() != 50 {
		t.Fatalf("after grant: %d", c.Available())
	}
	// A message larger than the window goes when nothing is outstanding.
	c.Add(50)
	if !c.Acquire(250, nil) || c.Available() != -150 {
		t.Fatalf("large message: %d", c.Available())
	}
	if c.Acquire(1, closed) {
		t.Fatal("acquired with negative credit")
	}
}

func TestInboxWindowAndGrants(t *testing.T) {
	in := flow.NewInbox(100, 1000)
	for i := 0; i < 4; i++ {
		if err := in.Push(msg(25)); err != nil {
			t.Fatal(err)
		}
	}
	if err := in.Push(msg(1)); fleet.CodeOf(err) != fleet.ResourceExhausted {
		t.Fatalf("overrun accepted: %v", err)
	}
	if in.Held() != 100 {
		t.Fatalf("held %d", in.Held())
	}
	var granted int64
	for i := 0; i < 4; i++ {
		m, g, err := in.Next(nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		bufpool.Put(m.Buf)
		granted += g
	}
	if granted != 100 || in.Held() != 0 {
		t.Fatalf("granted %d, held %d", granted, in.Held())
	}
	// A message larger than the window is accepted when nothing is outstanding.
	if err := in.Push(msg(500)); err != nil {
		t.Fatal(err)
	}
	if err := in.Push(msg(1001)); err == nil {
		t.Fatal("message over the size limit accepted")
	}
	in.Close(io.EOF)
	m, _, err := in.Next(nil, nil)
	if err != nil {
		t.Fatal("queued message lost at half-close")
	}
	bufpool.Put(m.Buf)
	if _, _, err := in.Next(nil, nil); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
	if err := in.Push(msg(1)); fleet.CodeOf(err) != fleet.FailedPrecondition {
		t.Fatalf("push after close: %v", err)
	}
}

func TestInboxAbort(t *testing.T) {
	in := flow.NewInbox(100, 100)
	in.Push(msg(10))
	boom := errors.New("boom")
	in.Abort(boom)
	if _, _, err := in.Next(nil, nil); err != boom || in.Held() != 0 {
		t.Fatalf("after abort: %v, held %d", err, in.Held())
	}
	stop := make(chan struct{})
	close(stop)
	in2 := flow.NewInbox(100, 100)
	if _, _, err := in2.Next(stop, func() error { return io.ErrClosedPipe }); err != io.ErrClosedPipe {
		t.Fatalf("abort channel: %v", err)
	}
}

// TestSmallThenLargeMessage is the deadlock FuzzFlow found: after a small
// message is consumed (less than a quarter of the window, so no grant), a
// message larger than the remaining credit must still go, and the
// receiver must take it.
func TestSmallThenLargeMessage(t *testing.T) {
	closed := make(chan struct{})
	close(closed)
	c, in := flow.NewCredit(79), flow.NewInbox(79, 158)
	if !c.Acquire(15, closed) {
		t.Fatal("first message")
	}
	if err := in.Push(msg(15)); err != nil {
		t.Fatal(err)
	}
	m, grant, err := in.Next(nil, nil)
	if err != nil || grant != 0 {
		t.Fatalf("grant %d, %v", grant, err)
	}
	bufpool.Put(m.Buf)
	if !c.Acquire(70, closed) {
		t.Fatalf("70 bytes with 15 outstanding of 79 (credit %d): would wait for ever", c.Available())
	}
	if err := in.Push(msg(70)); err != nil {
		t.Fatalf("receiver refused it: %v", err)
	}
	in.Abort(io.EOF)
}
