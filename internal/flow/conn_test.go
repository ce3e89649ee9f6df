package flow_test

import (
	"sync"
	"testing"

	"github.com/fleetrpc/fleet/internal/flow"
)

// TestConnCredit: the connection credit follows Credit's rule (credit
// covers n, or at most half the window outstanding), a nil credit grants
// at once, and a closed done channel stops a waiter without taking
// anything.
func TestConnCredit(t *testing.T) {
	var none *flow.ConnCredit
	if !none.Acquire(1<<30, nil) {
		t.Fatal("nil connection credit must grant")
	}
	c := flow.NewConnCredit(100)
	closed := make(chan struct{})
	close(closed)
	if !c.Acquire(60, nil) || c.Available() != 40 {
		t.Fatal("first acquire")
	}
	if c.Acquire(50, closed) || c.Available() != 40 {
		t.Fatalf("acquired past the credit: %d", c.Available())
	}
	c.Add(60)
	if !c.Acquire(250, nil) || c.Available() != -150 {
		t.Fatalf("large message with nothing outstanding: %d", c.Available())
	}
}

// TestConnCreditWakesAllWaiters: one Add that covers several waiting
// senders releases all of them (a stream-credit style single wake-up
// would leave all but one asleep).
func TestConnCreditWakesAllWaiters(t *testing.T) {
	const waiters = 8
	c := flow.NewConnCredit(100)
	if !c.Acquire(100, nil) {
		t.Fatal("initial acquire")
	}
	var wg sync.WaitGroup
	for i := 0; i < waiters; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !c.Acquire(10, nil) {
				t.Error("acquire failed")
			}
		}()
	}
	c.Add(10 * waiters)
	wg.Wait()
	if got := c.Available(); got != 0 {
		t.Fatalf("credit after %d waiters took 10 each: %d", waiters, got)
	}
}

// TestConnWindowGrantsOnReceipt: the receiver grants what arrived once a
// quarter of the window has, whatever the consumers do.
func TestConnWindowGrantsOnReceipt(t *testing.T) {
	w := flow.NewConnWindow(1000)
	var granted, received int64
	for i := 0; i < 100; i++ {
		received += 90
		g := w.Receive(90)
		if g != 0 && g < 250 {
			t.Fatalf("grant of %d before a quarter of the window", g)
		}
		granted += g
		if received-granted >= 250 {
			t.Fatalf("%d bytes received and not granted (quarter is 250)", received-granted)
		}
	}
	if w.Receive(0) != 0 {
		t.Fatal("empty frame granted")
	}
	// One frame larger than the window is granted back whole.
	if g := w.Receive(5000); g < 5000 {
		t.Fatalf("large frame granted %d", g)
	}
}
