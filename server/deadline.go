package server

import (
	"context"
	"sync"
	"time"
)

// lazyDeadlineCtx is a call's context when its request carries a
// deadline: the parent (the connection's context) with that deadline. It
// lives inside the call's callCtx and costs no allocation of its own. The
// timer context (context.WithDeadline: a timer, and a registration with
// the connection's context under its lock) is made only when something
// needs it: Done (a handler waiting on its context, or a context derived
// from it) or Value (context.Cause and the context package find their
// parent's cancellation through Value; callCtx answers the call's own keys
// before this is reached). Handlers that never wait, the common case, pay
// for neither; Deadline and Err answer from the deadline itself, as the
// timer context would. Safe for concurrent use.
type lazyDeadlineCtx struct {
	context.Context // the parent

	deadline time.Time

	mu         sync.Mutex
	child      context.Context
	stop       context.CancelFunc
	released   bool      // the call ended (release ran)
	releasedAt time.Time // when, for Err before the child exists
}

// materialize returns the timer context, making it on first use (already
// cancelled if the call has ended).
func (l *lazyDeadlineCtx) materialize() context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.child == nil {
		l.child, l.stop = context.WithDeadline(l.Context, l.deadline)
		if l.released {
			l.stop()
		}
	}
	return l.child
}

// unmade reports whether the timer context has not been made (nothing has
// asked for Done or Value yet).
func (l *lazyDeadlineCtx) unmade() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.child == nil
}

// Deadline returns the call's deadline, or the parent's when earlier.
func (l *lazyDeadlineCtx) Deadline() (time.Time, bool) {
	if pd, ok := l.Context.Deadline(); ok && pd.Before(l.deadline) {
		return pd, true
	}
	return l.deadline, true
}

// Done returns the timer context's channel: closed at the deadline, when
// the parent ends, or when the call ends.
func (l *lazyDeadlineCtx) Done() <-chan struct{} { return l.materialize().Done() }

// Err is what the timer context's Err would be: DeadlineExceeded once the
// deadline has passed (before the call ended), Canceled once the call
// ended, else the parent's error.
func (l *lazyDeadlineCtx) Err() error {
	l.mu.Lock()
	child, released, at := l.child, l.released, l.releasedAt
	l.mu.Unlock()
	if child != nil {
		return child.Err()
	}
	if err := l.Context.Err(); err != nil {
		return err
	}
	if released {
		if at.Before(l.deadline) {
			return context.Canceled
		}
		return context.DeadlineExceeded
	}
	if !time.Now().Before(l.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// Value answers from the timer context, made on first use, so that
// contexts derived from this one attach to its cancellation directly and
// context.Cause reports the deadline.
func (l *lazyDeadlineCtx) Value(key any) any { return l.materialize().Value(key) }

// release ends the call: the timer context, if made, is cancelled (which
// stops its timer and drops its registration with the parent).
func (l *lazyDeadlineCtx) release() {
	l.mu.Lock()
	l.released, l.releasedAt = true, time.Now()
	stop := l.stop
	l.mu.Unlock()
	if stop != nil {
		stop()
	}
}
