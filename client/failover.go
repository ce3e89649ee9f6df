package client

import (
	"errors"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/sony/gobreaker/v2"
)

// crashFailover reports whether a retry after err, which failed an attempt
// on ep, is the failover of a call whose server vanished, which the retry
// budget does not count. That is the case when all of these hold:
//
//   - the attempt failed at the connection, not in the server: code
//     Unavailable wrapping ErrConnectionLost (sent, then the connection
//     broke) or ErrNotSent (the dial or the write failed, or the
//     server's circuit breaker opened after it was chosen); or the server
//     answered ShuttingDown (the call did not run: the server is leaving,
//     as a server closed at once does for requests read while it closes);
//   - ep is then marked down (as its dial failure or its connection's
//     watcher also does; a tripped breaker already keeps it out), so new
//     calls avoid it for the down time (WithDownTime);
//   - another server remains usable: not down, breaker not open, not
//     already tried by this call.
//
// Why: a retry budget (Envoy's RetryBudget, a share of active requests;
// gRPC's retry throttling, gRFC A6, tokens drained by failures) exists to
// keep retries from multiplying the load of an overloaded service. A crash
// makes every call in flight on the crashed server fail at once, a burst a
// windowed budget cannot tell from overload although those calls never
// reached a healthy server; refusing their failover protects nothing. The
// amplification stays bounded: only calls that were on (or raced to) the
// crashed server before it was marked down, and after each down time the
// calls that try it again before a failed dial marks it down anew, retry
// exempt, and each call at most once per server. A service whose every server fails still
// has all its retries counted, since no usable server remains.
func (x *XClient) crashFailover(a *attempt, ep *endpoint, err error) bool {
	if x.opts.failMode != Failover {
		return false
	}
	switch fleet.CodeOf(err) {
	case fleet.ShuttingDown: // not run; the server is leaving
	case fleet.Unavailable:
		if !connectionFailure(err) {
			return false
		}
	default:
		return false
	}
	now := time.Now().UnixNano()
	tripped := errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests)
	if !tripped && ep.downUntil.Load() <= now {
		// The connection's watcher marks it down too, but maybe not yet.
		ep.markDown(x.opts.downFor)
	}
	return x.otherUsable(a, ep, now)
}

// otherUsable reports whether a server other than ep, not yet tried by
// this call, is usable at now (unix nanoseconds).
func (x *XClient) otherUsable(a *attempt, ep *endpoint, now int64) bool {
	for key, other := range *x.endpoints.Load() {
		if other == ep || a.triedKey(key) {
			continue
		}
		if other.usable(now, a.brk) {
			return true
		}
	}
	return false
}

// triedKey reports whether this call already tried the server key.
func (a *attempt) triedKey(key string) bool {
	for i := 0; i < a.ntried && i < len(a.tried); i++ {
		if a.tried[i] == key {
			return true
		}
	}
	return false
}

// connectionFailure reports whether err failed an attempt at the
// connection to the server: lost after the request was sent, or not sent
// because the dial or the write failed, or because the server's breaker
// is open. A server that left discovery or announced shutdown (those are
// chosen again without a retry) or no server at all are not.
func connectionFailure(err error) bool {
	if errors.Is(err, ErrConnectionLost) {
		return true
	}
	if !errors.Is(err, ErrNotSent) || err == errLeft {
		return false
	}
	for _, not := range []error{ErrGoingAway, ErrNoServer, ErrClosed} {
		if errors.Is(err, not) {
			return false
		}
	}
	return true
}
