package server

import (
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/fleetrpc/fleet"
)

// minFilter is a windowed minimum of latencies: the minimum over the
// current window and the one before it.
type minFilter struct {
	cur, prev time.Duration // 0: no sample
}

// add records rtt in the current window.
func (f *minFilter) add(rtt time.Duration) {
	if f.cur == 0 || rtt < f.cur {
		f.cur = rtt
	}
}

// roll starts a new window.
func (f *minFilter) roll() { f.prev, f.cur = f.cur, 0 }

// get returns the minimum over both windows; 0 before any sample.
func (f *minFilter) get() time.Duration {
	if f.prev == 0 || (f.cur != 0 && f.cur < f.prev) {
		return f.cur
	}
	return f.prev
}

// adaptiveLimiter is the state of WithAdaptiveLimit. Safe for concurrent
// use.
type adaptiveLimiter struct {
	cfg AdaptiveLimit

	mu       sync.Mutex
	limit    float64
	inflight int
	noLoad   minFilter
	period   int           // samples in the current period
	probe    int           // samples left in the probe; > 0: probing
	limited  bool          // a call was shed in the current period
	drained  bool          // a call ended with at most Min in flight in the current period
	wake     chan struct{} // closed (and replaced) when a call leaves while waiters > 0
	waiters  int           // oneway sends waiting in acquire
	shed     uint64
	backlog  []*admitWaiter // calls waiting for a slot, oldest first (served last)
	closed   bool           // Shutdown: no more waiting
}

// admitWaiter is a call waiting in the backlog of the adaptive limit.
type admitWaiter struct {
	ch    chan struct{} // closed when the call is granted a slot or Shutdown ends the wait
	state waitState     // guarded by the limiter's mu
}

// waitState is the outcome of a wait in the backlog.
type waitState uint8

const (
	waiting  waitState = iota
	granted            // holds a slot
	released           // Shutdown ended the wait
	gaveUp             // left the backlog: its wait ended first
)

func newAdaptiveLimiter(a AdaptiveLimit) *adaptiveLimiter {
	if a.Initial <= 0 {
		a.Initial = DefaultAdaptiveInitial
	}
	if a.Min <= 0 {
		a.Min = DefaultAdaptiveMin
	}
	if a.Max <= 0 {
		a.Max = DefaultAdaptiveMax
	}
	if a.Max < a.Min {
		a.Max = a.Min
	}
	if a.ProbeMultiplier <= 0 {
		a.ProbeMultiplier = DefaultAdaptiveProbeMultiplier
	}
	if a.Tolerance <= 0 {
		a.Tolerance = DefaultAdaptiveTolerance
	}
	a.Tolerance = max(a.Tolerance, 1)
	if a.QueueSize <= 0 {
		a.QueueSize = DefaultAdaptiveQueueSize
	}
	if a.Smoothing <= 0 || a.Smoothing > 1 {
		a.Smoothing = DefaultAdaptiveSmoothing
	}
	if a.BacklogTimeout <= 0 || a.Backlog < 0 {
		a.BacklogTimeout, a.Backlog = 0, -1
	}
	a.Initial = min(max(a.Initial, a.Min), a.Max)
	return &adaptiveLimiter{cfg: a, limit: float64(a.Initial), wake: make(chan struct{})}
}

// tryAcquire admits a call when fewer than the limit are in flight,
// without the backlog (admit is the server's admission; the model tests
// use this one).
func (l *adaptiveLimiter) tryAcquire() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inflight >= l.capLocked() {
		l.shed++
		l.limited = true
		return false
	}
	l.inflight++
	return true
}

// admit admits a call when fewer than the limit are in flight and none
// waits (ok); else it queues the call in the backlog when there is room
// (w, to be passed to await with the wait bound) or sheds it (neither).
func (l *adaptiveLimiter) admit() (ok bool, w *admitWaiter, wait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inflight < l.capLocked() && len(l.backlog) == 0 {
		l.inflight++
		return true, nil, 0
	}
	l.limited = true
	wait = time.Duration(min(l.cfg.BacklogTimeout*float64(l.noLoad.get()), float64(time.Hour)))
	if wait <= 0 || l.closed || len(l.backlog) >= l.backlogCapLocked() {
		l.shed++
		return false, nil, 0
	}
	w = &admitWaiter{ch: make(chan struct{})}
	l.backlog = append(l.backlog, w)
	return false, w, wait
}

// shedIfFull reports whether the limit is reached (as many calls in
// flight as it allows, or calls waiting in the backlog), counting a shed
// call when it is, in one critical section.
func (l *adaptiveLimiter) shedIfFull() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inflight < l.capLocked() && len(l.backlog) == 0 {
		return false
	}
	l.shed++
	return true
}

// backlogCapLocked returns the most calls that may wait. Called with mu
// held.
func (l *adaptiveLimiter) backlogCapLocked() int {
	if l.cfg.Backlog != 0 {
		return l.cfg.Backlog // negative: none
	}
	return max(int(math.Ceil(l.cfg.BacklogTimeout*l.limit)), 1)
}

// await ends w's wait: granted (the call holds a slot) when a slot came
// before the call gave up; released when Shutdown ended it; else gaveUp,
// the call having left the backlog (counted as shed when timedOut).
func (l *adaptiveLimiter) await(w *admitWaiter, gaveUpFirst, timedOut bool) waitState {
	l.mu.Lock()
	defer l.mu.Unlock()
	if w.state != waiting || !gaveUpFirst {
		return w.state
	}
	for i, x := range l.backlog {
		if x == w {
			l.backlog = append(l.backlog[:i], l.backlog[i+1:]...)
			l.backlog[len(l.backlog):cap(l.backlog)][0] = nil
			break
		}
	}
	w.state = gaveUp
	if timedOut {
		l.shed++
	}
	return gaveUp
}

// grantLocked hands free slots to the newest waiting calls (LIFO, as
// Netflix's LifoBlockingLimiter: under lasting overload the newest calls
// run with short waits and the oldest time out). Called with mu held.
func (l *adaptiveLimiter) grantLocked() {
	for len(l.backlog) > 0 && l.inflight < l.capLocked() {
		n := len(l.backlog) - 1
		w := l.backlog[n]
		l.backlog[n] = nil
		l.backlog = l.backlog[:n]
		w.state = granted
		l.inflight++
		close(w.ch)
	}
}

// shutdown ends every wait in the backlog (released) and stops queueing.
func (l *adaptiveLimiter) shutdown() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	for i, w := range l.backlog {
		w.state = released
		close(w.ch)
		l.backlog[i] = nil
	}
	l.backlog = l.backlog[:0]
}

// waiting returns the calls in the backlog.
func (l *adaptiveLimiter) waiting() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.backlog)
}

// acquire waits for room under the limit; false when done closes first.
func (l *adaptiveLimiter) acquire(done <-chan struct{}) bool {
	for {
		l.mu.Lock()
		if l.inflight < l.capLocked() {
			l.inflight++
			l.mu.Unlock()
			return true
		}
		wake := l.wake
		l.waiters++
		l.limited = true
		l.mu.Unlock()
		var ok bool
		select {
		case <-wake:
			ok = true
		case <-done:
		}
		l.mu.Lock()
		l.waiters--
		l.mu.Unlock()
		if !ok {
			return false
		}
	}
}

// release ends an admitted call; rtt <= 0 records no sample.
func (l *adaptiveLimiter) release(rtt time.Duration, dropped bool) {
	l.mu.Lock()
	if rtt > 0 {
		l.update(rtt, l.inflight, dropped)
	}
	l.inflight--
	l.grantLocked()
	if l.waiters > 0 {
		close(l.wake)
		l.wake = make(chan struct{})
	}
	l.mu.Unlock()
}

// update applies one sample: a call of latency rtt finished while inflight
// calls (itself included) were running. Called with mu held.
func (l *adaptiveLimiter) update(rtt time.Duration, inflight int, dropped bool) {
	before := l.noLoad.get()
	l.noLoad.add(rtt)
	noLoad := l.noLoad.get()
	if l.probe > 0 {
		l.probe--
		return // the limit holds while probing
	}
	if inflight <= l.cfg.Min {
		l.drained = true
	}
	if l.period++; l.period >= l.cfg.ProbeMultiplier*int(l.limit) {
		if l.limited && !l.drained {
			l.probe = inflight + l.cfg.Min
		}
		l.period, l.limited, l.drained = 0, false, false
		l.noLoad.roll()
		return
	}
	if before == 0 || rtt < before {
		return // a new shortest latency: the reference, not a gradient
	}
	if !dropped && float64(inflight)*2 < l.limit {
		return
	}
	var next float64
	if l.cfg.Algorithm == AdaptiveVegas {
		next = l.vegas(rtt, noLoad, dropped)
	} else {
		next = l.gradient(rtt, noLoad, dropped)
	}
	l.limit = min(max(next, float64(l.cfg.Min)), float64(l.cfg.Max))
}

// gradient returns the AdaptiveGradient limit after a sample.
func (l *adaptiveLimiter) gradient(rtt, noLoad time.Duration, dropped bool) float64 {
	g := 0.5
	if !dropped {
		g = min(max(l.cfg.Tolerance*float64(noLoad)/float64(rtt), 0.5), 1)
	}
	target := l.limit*g + l.cfg.QueueSize
	return l.limit + l.cfg.Smoothing*(target-l.limit)
}

// vegas returns the AdaptiveVegas limit after a sample.
func (l *adaptiveLimiter) vegas(rtt, noLoad time.Duration, dropped bool) float64 {
	f := max(1, math.Log10(l.limit))
	if dropped {
		return l.limit - f
	}
	queue := math.Ceil(l.limit * (1 - float64(noLoad)/float64(rtt)))
	switch {
	case queue <= f:
		return l.limit + 6*f
	case queue < 3*f:
		return l.limit + f
	case queue > 6*f:
		return l.limit - f
	}
	return l.limit
}

// capLocked returns the calls admitted at once: the limit, or Min while
// probing. Called with mu held.
func (l *adaptiveLimiter) capLocked() int {
	if l.probe > 0 {
		return min(int(l.limit), l.cfg.Min)
	}
	return int(l.limit)
}

// retryAfterMD is the metadata of a shed call: RetryAfterKey set to the
// no-load latency, rounded up to a millisecond, at least 1.
func (l *adaptiveLimiter) retryAfterMD() fleet.Metadata {
	l.mu.Lock()
	d := l.noLoad.get()
	l.mu.Unlock()
	ms := max(int64((d+time.Millisecond-1)/time.Millisecond), 1)
	return fleet.Metadata{RetryAfterKey: strconv.FormatInt(ms, 10)}
}

// state returns the current limit (Min while probing), the calls in flight under it and the
// calls shed so far.
func (l *adaptiveLimiter) state() (limit, inflight int, shed uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.capLocked(), l.inflight, l.shed
}

// AdaptiveLimitState returns the adaptive concurrency limit's current
// limit (at most Min during a probe of the no-load latency), the calls
// running under it, and the calls it has shed since the server was made;
// all zero without WithAdaptiveLimit. Safe for concurrent use.
func (s *Server) AdaptiveLimitState() (limit, inflight int, shed uint64) {
	if s.adaptive == nil {
		return 0, 0, 0
	}
	return s.adaptive.state()
}

// AdaptiveLimitWaiting returns the calls waiting in the adaptive limit's
// backlog (see AdaptiveLimit.Backlog); zero without WithAdaptiveLimit.
// Safe for concurrent use.
func (s *Server) AdaptiveLimitWaiting() int {
	if s.adaptive == nil {
		return 0
	}
	return s.adaptive.waiting()
}
