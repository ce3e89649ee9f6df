package server

import (
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/protocol"
)

// This file holds how a native connection's calls pass the adaptive limit
// (the limiter itself is in adaptive.go).

// admitAdaptive applies the adaptive limit to a call: under it the call
// holds a slot (held); over it a call (not a oneway send) waits in the
// backlog when there is room (w, for awaitAdaptive with the wait bound),
// else it is refused with ResourceExhausted and the retry-after metadata;
// a oneway send waits for a slot on the read loop, errClosed when the
// connection ended meanwhile.
func (c *conn) admitAdaptive(oneway bool) (held bool, w *admitWaiter, wait time.Duration, md fleet.Metadata, err error) {
	l := c.s.adaptive
	if l == nil {
		return false, nil, 0, nil, nil
	}
	if oneway {
		if !l.acquire(c.ctx.Done()) {
			return false, nil, 0, nil, errClosed
		}
		return true, nil, 0, nil, nil
	}
	ok, w, wait := l.admit()
	if ok || w != nil {
		return ok, w, wait, nil, nil
	}
	md, err = l.shedAnswer()
	return false, nil, 0, md, err
}

// shedAnswer is the answer of a call shed by the limit.
func (l *adaptiveLimiter) shedAnswer() (fleet.Metadata, error) {
	limit, _, _ := l.state()
	return l.retryAfterMD(), fleet.Errorf(fleet.ResourceExhausted, "server overloaded: adaptive concurrency limit of %d calls reached", limit)
}

// waitCancel registers the channel that a cancel frame for seq closes
// while the call waits in the backlog, or returns nil when the client
// cannot cancel. The read loop registers it before it reads the next
// frame, so that a cancel frame right behind the request is not lost.
func (c *conn) waitCancel(seq uint64) chan struct{} {
	if !c.cancellable() {
		return nil
	}
	cancel := make(chan struct{})
	c.ext.mu.Lock()
	if c.ext.waiting == nil {
		c.ext.waiting = make(map[uint64]chan struct{})
	}
	c.ext.waiting[seq] = cancel
	c.ext.mu.Unlock()
	return cancel
}

// awaitAdaptive waits, on the call's own goroutine, for the slot of the
// call f queued in the limit's backlog as w: at most wait, and never past
// the call's deadline. It returns held once granted a slot (f.Timeout then
// counts down the time waited); else the call's answer: ResourceExhausted
// with the retry-after metadata when the wait bound passed, DeadlineExceeded
// when the call's deadline did, Canceled on the client's cancel frame,
// ShuttingDown on Shutdown, errClosed when the connection ended. cancel is
// the call's channel from waitCancel (nil when the client cannot cancel).
func (c *conn) awaitAdaptive(f *protocol.Frame, w *admitWaiter, wait time.Duration, cancel chan struct{}) (held bool, md fleet.Metadata, err error) {
	l := c.s.adaptive
	start := time.Now()
	bound, byDeadline := wait, false
	if f.Timeout > 0 {
		if dl := time.Duration(f.Timeout) * time.Millisecond; dl <= wait {
			bound, byDeadline = dl, true
		}
	}
	if cancel != nil {
		defer func() {
			c.ext.mu.Lock()
			if c.ext.waiting[f.Seq] == cancel {
				delete(c.ext.waiting, f.Seq)
			}
			c.ext.mu.Unlock()
		}()
	}
	timer := time.NewTimer(bound)
	defer timer.Stop()
	var timedOut, cancelled, closed bool
	select {
	case <-w.ch:
	case <-timer.C:
		timedOut = true
	case <-cancel:
		cancelled = true
	case <-c.ctx.Done():
		closed = true
	}
	switch l.await(w, timedOut || cancelled || closed, timedOut && !byDeadline) {
	case granted:
		if f.Timeout > 0 {
			left := time.Duration(f.Timeout)*time.Millisecond - time.Since(start)
			if left <= 0 {
				l.release(0, false)
				return false, nil, errDeadline
			}
			f.Timeout = uint32((left + time.Millisecond - 1) / time.Millisecond)
		}
		return true, nil, nil
	case released:
		return false, nil, errShuttingDown
	}
	switch {
	case closed:
		return false, nil, errClosed
	case cancelled:
		return false, nil, errCancelled
	case byDeadline:
		return false, nil, errDeadline
	}
	md, err = l.shedAnswer()
	return false, md, err
}

// Answers of a call that left the adaptive limit's backlog.
var (
	errDeadline  = fleet.NewError(fleet.DeadlineExceeded, "deadline exceeded waiting for the adaptive concurrency limit")
	errCancelled = fleet.NewError(fleet.Canceled, "call cancelled by the client")
)

// releaseAdaptive gives back the adaptive-limit slot of a call admitted at
// since (zero: none held), sampling its latency when it ran; err is the
// call's outcome (DeadlineExceeded counts as a drop).
func (c *conn) releaseAdaptive(since time.Time, err error) {
	if since.IsZero() {
		return
	}
	c.s.adaptive.release(time.Since(since), fleet.CodeOf(err) == fleet.DeadlineExceeded)
}

// dropAdaptive gives back the slot of a call admitted at since (zero:
// none held) that was refused before running: no latency sample.
func (c *conn) dropAdaptive(since time.Time) {
	if !since.IsZero() {
		c.s.adaptive.release(0, false)
	}
}
