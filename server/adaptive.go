package server

import (
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/fleetrpc/fleet"
)

// AdaptiveLimit configures the adaptive concurrency limit of
// WithAdaptiveLimit. Zero fields take the documented defaults.
//
// The algorithm is TCP Vegas applied to calls, as in the VegasLimit of
// Netflix's concurrency-limits library
// (https://github.com/Netflix/concurrency-limits): the shortest latency
// seen is taken as the latency without queueing (rttNoLoad), and each
// completed call of latency rtt estimates the calls queued in the server as
// queue = ceil(limit × (1 − rttNoLoad/rtt)). With f = max(1, log10(limit)):
// queue ≤ f grows the limit by 6f; queue < 3f grows it by f; queue > 6f
// shrinks it by f; otherwise it stays. A call that ended DeadlineExceeded
// shrinks it by f. A sample taken while fewer than half the limit were in
// flight does not grow it (the limit is not what bounds the load). Every
// ProbeMultiplier × limit samples the baseline is reset to the next
// sample's latency, so that a lasting change of the handlers' cost is
// learnt.
type AdaptiveLimit struct {
	// Initial is the limit before any sample. Default 20.
	Initial int
	// Min is the lowest the limit goes. Default 4.
	Min int
	// Max is the highest the limit goes. Default 1000.
	Max int
	// ProbeMultiplier sets how often the no-load latency is re-measured:
	// every ProbeMultiplier × limit samples. Default 30.
	ProbeMultiplier int
}

// Defaults of AdaptiveLimit.
const (
	DefaultAdaptiveInitial         = 20
	DefaultAdaptiveMin             = 4
	DefaultAdaptiveMax             = 1000
	DefaultAdaptiveProbeMultiplier = 30
)

// WithAdaptiveLimit bounds the calls running at once, all connections and
// methods together, by a limit that adapts to the latency of the handlers
// (see AdaptiveLimit for the algorithm). A call arriving while the limit is
// reached is answered ResourceExhausted without running, with the response
// metadata RetryAfterKey (as the rate limits send) set to the recent
// no-load latency in milliseconds, at least 1; an XClient takes such an
// answer as not processed and fails over. A oneway send over the limit is
// not dropped: the server stops reading its connection until a call
// finishes. The latency measured runs from admission to the handler's
// return (queueing for a worker included). Checked after auth and the rate
// limits; streams are not limited. Default: off.
func WithAdaptiveLimit(a AdaptiveLimit) Option {
	return optionFunc(func(o *options) { o.adaptive = &a })
}

// adaptiveLimiter is the state of WithAdaptiveLimit. Safe for concurrent
// use.
type adaptiveLimiter struct {
	cfg AdaptiveLimit

	mu        sync.Mutex
	limit     float64
	inflight  int
	rttNoLoad time.Duration
	samples   int           // since the last probe
	wake      chan struct{} // closed (and replaced) when a call leaves while waiters > 0
	waiters   int           // oneway sends waiting in acquire
	shed      uint64
}

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
	a.Initial = min(max(a.Initial, a.Min), a.Max)
	return &adaptiveLimiter{cfg: a, limit: float64(a.Initial), wake: make(chan struct{})}
}

// tryAcquire admits a call when fewer than the limit are in flight.
func (l *adaptiveLimiter) tryAcquire() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inflight >= int(l.limit) {
		l.shed++
		return false
	}
	l.inflight++
	return true
}

// acquire waits for room under the limit; false when done closes first.
func (l *adaptiveLimiter) acquire(done <-chan struct{}) bool {
	for {
		l.mu.Lock()
		if l.inflight < int(l.limit) {
			l.inflight++
			l.mu.Unlock()
			return true
		}
		wake := l.wake
		l.waiters++
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
	if l.waiters > 0 {
		close(l.wake)
		l.wake = make(chan struct{})
	}
	l.mu.Unlock()
}

// update applies one sample: a call of latency rtt finished while inflight
// calls (itself included) were running. Called with mu held.
func (l *adaptiveLimiter) update(rtt time.Duration, inflight int, dropped bool) {
	l.samples++
	if l.samples > l.cfg.ProbeMultiplier*int(l.limit) {
		l.samples = 0
		l.rttNoLoad = rtt
		return
	}
	if l.rttNoLoad == 0 || rtt < l.rttNoLoad {
		l.rttNoLoad = rtt
		return
	}
	f := max(1, math.Log10(l.limit))
	next := l.limit
	switch {
	case dropped:
		next = l.limit - f
	case float64(inflight)*2 < l.limit:
		return
	default:
		queue := math.Ceil(l.limit * (1 - float64(l.rttNoLoad)/float64(rtt)))
		switch {
		case queue <= f:
			next = l.limit + 6*f
		case queue < 3*f:
			next = l.limit + f
		case queue > 6*f:
			next = l.limit - f
		}
	}
	l.limit = min(max(next, float64(l.cfg.Min)), float64(l.cfg.Max))
}

// retryAfterMD is the metadata of a shed call: RetryAfterKey set to the
// no-load latency, rounded up to a millisecond, at least 1.
func (l *adaptiveLimiter) retryAfterMD() fleet.Metadata {
	l.mu.Lock()
	d := l.rttNoLoad
	l.mu.Unlock()
	ms := max(int64((d+time.Millisecond-1)/time.Millisecond), 1)
	return fleet.Metadata{RetryAfterKey: strconv.FormatInt(ms, 10)}
}

// state returns the current limit, the calls in flight under it and the
// calls shed so far.
func (l *adaptiveLimiter) state() (limit, inflight int, shed uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int(l.limit), l.inflight, l.shed
}

// AdaptiveLimitState returns the adaptive concurrency limit's current
// limit, the calls running under it, and the calls it has shed since the
// server was made; all zero without WithAdaptiveLimit. Safe for
// concurrent use.
func (s *Server) AdaptiveLimitState() (limit, inflight int, shed uint64) {
	if s.adaptive == nil {
		return 0, 0, 0
	}
	return s.adaptive.state()
}

// admitAdaptive applies the adaptive limit to a call: a call over it is
// refused with ResourceExhausted and the retry-after metadata; a oneway
// send waits. It reports whether the call holds a slot (to be released),
// and errClosed when the connection ended while waiting.
func (c *conn) admitAdaptive(oneway bool) (bool, fleet.Metadata, error) {
	l := c.s.adaptive
	if l == nil {
		return false, nil, nil
	}
	if oneway {
		if !l.acquire(c.ctx.Done()) {
			return false, nil, errClosed
		}
		return true, nil, nil
	}
	if l.tryAcquire() {
		return true, nil, nil
	}
	limit, _, _ := l.state()
	return false, l.retryAfterMD(), fleet.Errorf(fleet.ResourceExhausted, "server overloaded: adaptive concurrency limit of %d calls reached", limit)
}

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
