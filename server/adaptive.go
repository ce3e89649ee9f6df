package server

import (
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/protocol"
)

// AdaptiveAlgorithm selects how WithAdaptiveLimit adapts its limit.
type AdaptiveAlgorithm int

const (
	// AdaptiveGradient (the default) is a gradient limit after the
	// GradientLimit and Gradient2Limit of Netflix's concurrency-limits
	// (https://github.com/Netflix/concurrency-limits): each completed call
	// of latency rtt gives gradient = clamp(Tolerance × rttNoLoad / rtt,
	// 0.5, 1) and the limit moves a Smoothing share of the way to
	// limit × gradient + QueueSize. Without queueing (rtt ≤ Tolerance ×
	// rttNoLoad) the limit grows by Smoothing × QueueSize per call; with
	// queueing, limit × rttNoLoad / rtt is (by Little's law) the number of
	// calls the server runs without queueing, c, and the limit settles
	// at about Tolerance × c + QueueSize (7 where the handlers run 4 calls
	// at once, with the defaults; 7.0-7.1 on average on the overload
	// bench). A call that
	// ended DeadlineExceeded counts as gradient 0.5. Unlike
	// Gradient2Limit, whose reference is an exponential average of all
	// latencies and so follows a standing queue upwards, the reference
	// rttNoLoad is the probed minimum described at AdaptiveLimit.
	AdaptiveGradient AdaptiveAlgorithm = iota
	// AdaptiveVegas is TCP Vegas applied to calls, as in the VegasLimit of
	// Netflix's concurrency-limits: each completed call of latency rtt
	// estimates the calls queued in the server as queue = ceil(limit × (1 −
	// rttNoLoad/rtt)). With f = max(1, log10(limit)): queue ≤ f grows the
	// limit by 6f; queue < 3f grows it by f; queue > 6f shrinks it by f;
	// otherwise it stays. A call that ended DeadlineExceeded shrinks it by
	// f. It keeps about 3-6 calls queued: on a server that runs 4 calls at
	// once it settles at 7-10.
	AdaptiveVegas
)

// String returns "gradient", "vegas" or "AdaptiveAlgorithm(n)".
func (a AdaptiveAlgorithm) String() string {
	switch a {
	case AdaptiveGradient:
		return "gradient"
	case AdaptiveVegas:
		return "vegas"
	}
	return "AdaptiveAlgorithm(" + strconv.Itoa(int(a)) + ")"
}

// AdaptiveLimit configures the adaptive concurrency limit of
// WithAdaptiveLimit. Zero fields take the documented defaults.
//
// Both algorithms (see AdaptiveAlgorithm) compare each completed call's
// latency, from admission to the handler's return, with rttNoLoad, the
// latency without queueing, measured as in BBR (Cardwell et al., "BBR:
// Congestion-Based Congestion Control", ACM Queue 14(5), 2016): rttNoLoad
// is the shortest latency of the current and the previous period of
// ProbeMultiplier × limit calls. A period in which the limit was reached
// (a call was shed, or a oneway send waited) and no call finished with at
// most Min calls in flight ends with a probe: for the next n + Min calls, n
// being the calls then in flight, the limit is held and at most Min calls
// are admitted at once, so that the calls in flight drain and some run
// without queueing. (A standing queue would otherwise hide the no-load
// latency: Vegas' reset of the baseline to one sample, or Gradient2's
// average of all latencies, then follow the queue upwards.) A lasting
// change of the handlers' cost is so learnt within two periods; a probe
// sheds calls only on a server already shedding, and costs throughput only
// where more than Min calls run at once unqueued. A sample taken while
// fewer than half the limit were in flight does not move the limit (the
// limit is not what bounds the load), nor does a new shortest latency;
// both feed rttNoLoad.
//
// With BacklogTimeout > 0 (off by default), a call arriving while the
// limit is reached waits in a short backlog rather than being shed at
// once, as in the LifoBlockingLimiter of Netflix's concurrency-limits: at
// most Backlog calls wait, each at most BacklogTimeout × rttNoLoad (and
// never past its deadline), and a slot freed by a finishing call goes to
// the newest waiting call (LIFO: under lasting overload the newest calls
// run after short waits and the oldest time out, rather than every call
// waiting the whole bound). The wait runs on a goroutine of the call's
// own, never on the connection's read loop; it is not part of the latency
// sample, which starts when the call gets its slot (and the call's
// deadline, passed on to its handler, counts the wait). A call leaves the
// backlog with ResourceExhausted and the retry-after hint when its wait
// bound passes (counted as shed), with DeadlineExceeded when its deadline
// does, with Canceled on the client's cancel frame, and with ShuttingDown
// when Shutdown starts. Before the first sample (no rttNoLoad) no call
// waits. The backlog keeps the handlers fed between arrivals but adds
// about one handler's run of waiting to the calls it admits: on the
// overload bench (docs/perf/log.md, "The admission backlog") BacklogTimeout 1 raised
// the goodput at twice the capacity from 0.88 to 0.91-0.94 of peak (slots
// busy 92 % to 98 %) and the admitted calls' p99 from 2.6 to 3.2-3.6 times
// the uncongested p99; no setting tried improved both, so it is off by
// default.
//
// The limiter is safe for concurrent use: one mutex guards its state.
type AdaptiveLimit struct {
	// Algorithm is the adaptation rule. Default AdaptiveGradient.
	Algorithm AdaptiveAlgorithm
	// Initial is the limit before any sample, in calls. Default 20.
	Initial int
	// Min is the lowest the limit goes, in calls. Default 4.
	Min int
	// Max is the highest the limit goes, in calls. Default 1000.
	Max int
	// ProbeMultiplier sets the probe period of the no-load latency:
	// ProbeMultiplier × limit calls. Default 30.
	ProbeMultiplier int
	// Tolerance (AdaptiveGradient) is the latency inflation, as a multiple
	// of rttNoLoad, taken as no queueing. Default 1.5; values below 1 are
	// taken as 1.
	Tolerance float64
	// QueueSize (AdaptiveGradient) is the queue allowance in calls: how far
	// the limit may grow above what runs unqueued. Default 1: with calls
	// arriving evenly, 2 kept more calls queued on the slots and raised the
	// admitted calls' p99 with the slots as busy (docs/perf/log.md,
	// "Adaptive limit: QueueSize").
	QueueSize float64
	// Smoothing (AdaptiveGradient) is the share of the way, in (0, 1], the
	// limit moves towards each sample's new estimate. Default 0.2.
	Smoothing float64
	// BacklogTimeout is the longest a call arriving while the limit is
	// reached waits for a slot, as a multiple of rttNoLoad (so it follows
	// the handlers' cost), at most an hour. Default 0: no backlog, such
	// calls are shed at once (see the measurements at AdaptiveLimit for
	// why it is off).
	BacklogTimeout float64
	// Backlog (with BacklogTimeout > 0) is the most calls waiting at once,
	// in calls. Default 0: the current limit × BacklogTimeout, rounded up
	// (by Little's law about the calls that finish within the wait bound,
	// so that a longer backlog would mostly time out); negative: no
	// backlog.
	Backlog int
}

// Defaults of AdaptiveLimit.
const (
	DefaultAdaptiveInitial         = 20
	DefaultAdaptiveMin             = 4
	DefaultAdaptiveMax             = 1000
	DefaultAdaptiveProbeMultiplier = 30
	DefaultAdaptiveTolerance       = 1.5
	DefaultAdaptiveQueueSize       = 1.0
	DefaultAdaptiveSmoothing       = 0.2
	DefaultAdaptiveBacklogTimeout  = 0.0 // no backlog
)

// WithAdaptiveLimit bounds the calls running at once, all connections and
// methods together, by a limit that adapts to the latency of the handlers
// (see AdaptiveLimit and AdaptiveAlgorithm for the algorithms). A call
// arriving while the limit is reached (and, with AdaptiveLimit's
// BacklogTimeout, finding its backlog full or waiting there in vain) is
// answered ResourceExhausted without running, with the
// response metadata RetryAfterKey (as the rate limits send) set to the
// recent no-load latency in milliseconds, at least 1; an XClient takes
// such an answer as not processed and fails over. A
// oneway send over the limit is not dropped: the server stops reading its
// connection until a call finishes. The latency measured runs from
// admission to the handler's return (queueing for a worker included).
// Checked after auth and the rate limits; streams are not limited.
// Default: off.
func WithAdaptiveLimit(a AdaptiveLimit) Option {
	return optionFunc(func(o *options) { o.adaptive = &a })
}

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
