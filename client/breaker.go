package client

import (
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
)

// BreakerSettings configures the circuit breaker an XClient keeps for each
// server. A zero field takes its default, so BreakerSettings{} is the
// default breaker.
//
// The breaker is the classic three-state machine (closed, open,
// half-open) described in Michael Nygard's "Release It!" and implemented
// by github.com/sony/gobreaker, which Fleet uses internally. Only server
// failures count against a server: codes Unavailable, ShuttingDown,
// DeadlineExceeded and Internal. A handler's own error, or a call the
// caller cancelled, does not.
type BreakerSettings struct {
	// Failures is the number of consecutive server failures that opens
	// the breaker: the server is then skipped. Default 5.
	Failures uint32
	// OpenFor is how long an open breaker skips its server before it lets
	// probe calls through (the half-open state). Default 5 s.
	OpenFor time.Duration
	// Probes is how many calls may run while half-open: that many
	// successes in a row close the breaker, one failure opens it again.
	// Default 1.
	Probes uint32
	// ResetEvery clears the closed breaker's counts at this interval.
	// Default 0: counts are cleared only by a success, which resets the
	// consecutive-failure count anyway.
	ResetEvery time.Duration
	// Disabled turns the breaker off: no server is ever skipped for its
	// failures. Default false.
	Disabled bool
}

// newBreaker builds the breaker of the server named key.
// onChange, when not nil, is called on every state change.
func newBreaker(key string, s BreakerSettings, onChange func(from, to BreakerState)) *gobreaker.TwoStepCircuitBreaker[struct{}] {
	failures := s.Failures
	if failures == 0 {
		failures = 5
	}
	if s.Disabled {
		failures = math.MaxUint32
	}
	st := gobreaker.Settings{
		Name:        key,
		MaxRequests: max(1, s.Probes),
		Interval:    s.ResetEvery,
		Timeout:     s.OpenFor,
		ReadyToTrip: func(c gobreaker.Counts) bool { return !s.Disabled && c.ConsecutiveFailures >= failures },
		// A connection failure is the down time's business (markDown),
		// not the breaker's: a crash fails every call in flight at once,
		// which would otherwise hold the server's breaker open for its
		// whole timeout after the server is back.
		IsSuccessful: func(err error) bool { return !serverFailure(err) || connectionFailure(err) },
	}
	if st.Timeout <= 0 {
		st.Timeout = 5 * time.Second
	}
	if onChange != nil {
		st.OnStateChange = func(_ string, from, to gobreaker.State) {
			onChange(breakerState(from), breakerState(to))
		}
	}
	return gobreaker.NewTwoStepCircuitBreaker[struct{}](st)
}

// BreakerState is the state of one server's circuit breaker, as reported to
// a BreakerObserver.
type BreakerState uint8

// The circuit breaker states: Closed lets every call through, Open skips
// the server until BreakerSettings.OpenFor has passed, HalfOpen lets
// BreakerSettings.Probes calls through to test the server.
const (
	BreakerClosed BreakerState = iota
	BreakerHalfOpen
	BreakerOpen
)

// String returns "closed", "half-open" or "open".
func (s BreakerState) String() string {
	switch s {
	case BreakerHalfOpen:
		return "half-open"
	case BreakerOpen:
		return "open"
	}
	return "closed"
}

func breakerState(s gobreaker.State) BreakerState {
	switch s {
	case gobreaker.StateHalfOpen:
		return BreakerHalfOpen
	case gobreaker.StateOpen:
		return BreakerOpen
	}
	return BreakerClosed
}

// normalized returns s with its defaults filled in, so that two settings
// that make the same breaker compare equal.
func (s BreakerSettings) normalized() BreakerSettings {
	if s.Disabled {
		return BreakerSettings{Disabled: true}
	}
	if s.Failures == 0 {
		s.Failures = 5
	}
	if s.OpenFor <= 0 {
		s.OpenFor = 5 * time.Second
	}
	if s.Probes == 0 {
		s.Probes = 1
	}
	s.ResetEvery = max(s.ResetEvery, 0)
	return s
}

// over returns the breaker settings of a call whose policy sets s over
// the XClient's own base: Disabled as s says, each zero field of s taken
// from base, normalized.
func (s BreakerSettings) over(base BreakerSettings) BreakerSettings {
	if s.Disabled {
		return BreakerSettings{Disabled: true}
	}
	base.Disabled = false
	if s.Failures > 0 {
		base.Failures = s.Failures
	}
	if s.OpenFor > 0 {
		base.OpenFor = s.OpenFor
	}
	if s.Probes > 0 {
		base.Probes = s.Probes
	}
	if s.ResetEvery > 0 {
		base.ResetEvery = s.ResetEvery
	}
	return base.normalized()
}

// maxPolicyBreakers bounds the breakers a server keeps for the settings
// of traffic policies (CallPolicy.Breaker); beyond, the one least
// recently used is dropped.
const maxPolicyBreakers = 8

// policyBreaker is a server's breaker for one policy setting.
type policyBreaker struct {
	st   BreakerSettings // normalized
	cb   *gobreaker.TwoStepCircuitBreaker[struct{}]
	used atomic.Int64 // unix seconds of the last call through it
}

// findPolicyBreaker returns ep's breaker for st, nil when it has none.
func (ep *endpoint) findPolicyBreaker(st BreakerSettings) *policyBreaker {
	if l := ep.pbs.Load(); l != nil {
		for _, pb := range *l {
			if pb.st == st {
				return pb
			}
		}
	}
	return nil
}

// breakerFor returns the breaker a call whose settings are st goes
// through on ep: ep.breaker when st is the XClient's own setting, nil
// when st disables the breaker, else ep's breaker for st, made on first
// use (the least recently used one dropped when ep keeps
// maxPolicyBreakers already).
func (x *XClient) breakerFor(ep *endpoint, s *callSettings) *gobreaker.TwoStepCircuitBreaker[struct{}] {
	if !s.ownBreaker {
		return ep.breaker
	}
	if s.breaker.Disabled {
		return nil
	}
	now := time.Now().Unix()
	pb := ep.findPolicyBreaker(s.breaker)
	if pb == nil {
		ep.mu.Lock()
		if pb = ep.findPolicyBreaker(s.breaker); pb == nil {
			pb = &policyBreaker{st: s.breaker, cb: newBreaker(ep.key, s.breaker, nil)}
			var next []*policyBreaker
			if l := ep.pbs.Load(); l != nil {
				next = slices.Clone(*l)
			}
			if len(next) >= maxPolicyBreakers {
				lru := 0
				for i, e := range next {
					if e.used.Load() < next[lru].used.Load() {
						lru = i
					}
				}
				next = slices.Delete(next, lru, lru+1)
			}
			next = append(next, pb)
			ep.pbs.Store(&next)
		}
		ep.mu.Unlock()
	}
	if pb.used.Load() != now {
		pb.used.Store(now)
	}
	return pb.cb
}

// breakerOpen reports whether the breaker a call with settings brk (nil:
// the XClient's own) would go through on ep is open. It makes no
// breaker: one not made yet is closed.
func (ep *endpoint) breakerOpen(brk *BreakerSettings) bool {
	if brk == nil {
		return ep.breaker.State() == gobreaker.StateOpen
	}
	if brk.Disabled {
		return false
	}
	pb := ep.findPolicyBreaker(*brk)
	return pb != nil && pb.cb.State() == gobreaker.StateOpen
}
