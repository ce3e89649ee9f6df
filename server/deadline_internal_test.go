package server

import (
	"context"
	"errors"
	"testing"
	"time"
)

func newLazyDeadline(parent context.Context, d time.Duration) *lazyDeadlineCtx {
	return &lazyDeadlineCtx{Context: parent, deadline: time.Now().Add(d)}
}

// waitDone waits (at most 10 s) for ctx to be done.
func waitDone(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("context not done 10 s after its deadline")
	}
}

// TestLazyDeadlineExpires: without anyone asking for Done, Err turns to
// DeadlineExceeded once the deadline passes; Done, asked later, is closed;
// Deadline reports the deadline.
func TestLazyDeadlineExpires(t *testing.T) {
	l := newLazyDeadline(context.Background(), 20*time.Millisecond)
	if d, ok := l.Deadline(); !ok || !d.Equal(l.deadline) {
		t.Fatalf("Deadline() = %v, %v", d, ok)
	}
	for end := time.Now().Add(10 * time.Second); l.Err() == nil; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("Err still nil 10 s after the deadline")
		}
	}
	if err := l.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Err() = %v, want DeadlineExceeded", err)
	}
	waitDone(t, l)
	if err := l.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Err() after Done = %v, want DeadlineExceeded", err)
	}
	if cause := context.Cause(l); !errors.Is(cause, context.DeadlineExceeded) {
		t.Fatalf("Cause = %v, want DeadlineExceeded", cause)
	}
	l.release()
}

// TestLazyDeadlineDerived: a context derived from it (which asks for Done)
// ends at the deadline, and its cause is the deadline.
func TestLazyDeadlineDerived(t *testing.T) {
	l := newLazyDeadline(context.Background(), 20*time.Millisecond)
	defer l.release()
	derived, cancel := context.WithCancel(l)
	defer cancel()
	waitDone(t, derived)
	if err := derived.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("derived Err() = %v, want DeadlineExceeded", err)
	}
	if cause := context.Cause(derived); !errors.Is(cause, context.DeadlineExceeded) {
		t.Fatalf("derived Cause = %v, want DeadlineExceeded", cause)
	}
}

// TestLazyDeadlineReleased: a call that ended before its deadline leaves
// a context that reports Canceled, with or without the timer context, and
// whose Done is closed.
func TestLazyDeadlineReleased(t *testing.T) {
	for _, early := range []bool{false, true} {
		l := newLazyDeadline(context.Background(), time.Hour)
		if early {
			_ = l.Done() // the timer context exists before the call ends
		}
		if err := l.Err(); err != nil {
			t.Fatalf("early=%v: Err() before release = %v", early, err)
		}
		l.release()
		if err := l.Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("early=%v: Err() = %v, want Canceled", early, err)
		}
		waitDone(t, l)
	}
}

// TestLazyDeadlineParent: the parent's end ends it, and an earlier parent
// deadline is its deadline.
func TestLazyDeadlineParent(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	l := newLazyDeadline(parent, time.Hour)
	defer l.release()
	cancel()
	if err := l.Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Err() = %v, want Canceled", err)
	}
	waitDone(t, l)

	pd, cancel2 := context.WithTimeout(context.Background(), time.Minute)
	defer cancel2()
	l2 := newLazyDeadline(pd, time.Hour)
	defer l2.release()
	want, _ := pd.Deadline()
	if d, ok := l2.Deadline(); !ok || !d.Equal(want) {
		t.Fatalf("Deadline() = %v, %v; want the parent's %v", d, ok, want)
	}
}

// TestCancelOverLazyDeadline: a tracked call's context over a deadline
// whose timer context was not made (the one-context path of
// lazyCancelCtx.materialize) ends at the deadline with DeadlineExceeded,
// on a cancel frame with Canceled, and with the connection; it reports
// the call's deadline throughout.
func TestCancelOverLazyDeadline(t *testing.T) {
	mk := func(parent context.Context, d time.Duration) (*lazyDeadlineCtx, *lazyCancelCtx) {
		dl := newLazyDeadline(parent, d)
		return dl, &lazyCancelCtx{Context: dl}
	}
	check := func(name string, lc *lazyCancelCtx, want error) {
		t.Helper()
		waitDone(t, lc)
		if err := lc.Err(); !errors.Is(err, want) {
			t.Fatalf("%s: Err() = %v, want %v", name, err, want)
		}
		if cause := context.Cause(lc); !errors.Is(cause, want) {
			t.Fatalf("%s: Cause = %v, want %v", name, cause, want)
		}
	}

	dl, lc := mk(context.Background(), 20*time.Millisecond)
	if d, ok := lc.Deadline(); !ok || !d.Equal(dl.deadline) {
		t.Fatalf("Deadline() = %v, %v; want %v", d, ok, dl.deadline)
	}
	check("deadline", lc, context.DeadlineExceeded)
	if !dl.unmade() {
		t.Fatal("the deadline's own timer context was made as well")
	}
	derived, cancel := context.WithCancel(lc)
	waitDone(t, derived)
	cancel()
	lc.release()
	dl.release()

	dl, lc = mk(context.Background(), time.Hour)
	_ = lc.Done()
	lc.cancel()
	check("cancel frame", lc, context.Canceled)
	if d, ok := lc.Deadline(); !ok || !d.Equal(dl.deadline) {
		t.Fatalf("Deadline() after the cancel = %v, %v; want %v", d, ok, dl.deadline)
	}
	lc.release()
	dl.release()

	conn, closeConn := context.WithCancel(context.Background())
	dl, lc = mk(conn, time.Hour)
	_ = lc.Done()
	closeConn()
	check("connection", lc, context.Canceled)
	lc.release()
	dl.release()

	// A deadline whose timer context exists already (something asked it
	// first) keeps the two-context path.
	dl, lc = mk(context.Background(), 20*time.Millisecond)
	_ = dl.Done()
	check("made first", lc, context.DeadlineExceeded)
	lc.release()
	dl.release()
}
