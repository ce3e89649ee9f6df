package client

import (
	"math"
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
