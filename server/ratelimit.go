package server

import (
	"context"
	"strconv"
	"time"

	"github.com/fleetrpc/fleet"
	"golang.org/x/time/rate"
)

// RetryAfterKey is the response metadata key under which a call refused by
// a rate limit (WithRateLimit, WithMethodRateLimit) or by the adaptive
// concurrency limit (WithAdaptiveLimit) carries the time, in milliseconds
// as a decimal string, after which a retry may be admitted. A
// ResourceExhausted answer carrying it means the call did not run (the
// client takes it as shed: client.ErrShed); handlers must not set it.
const RetryAfterKey = "retry-after-ms"

type rateKey struct{ service, method string }

type methodLimit struct {
	key   rateKey
	limit rate.Limit
	burst int
}

// limiters holds the token buckets (golang.org/x/time/rate) of the rate
// limits; nil fields mean no limit. Built once by New. methods is keyed by
// service, then method, so that the read loop looks a call up by the bytes
// of its frame without making strings.
type limiters struct {
	server  *rate.Limiter
	methods map[string]map[string]*rate.Limiter
}

func newLimiters(o *options) limiters {
	var l limiters
	if o.rate > 0 {
		l.server = rate.NewLimiter(o.rate, max(o.rateBurst, 1))
	}
	for _, m := range o.methodRates {
		if m.limit <= 0 {
			continue
		}
		if l.methods == nil {
			l.methods = map[string]map[string]*rate.Limiter{}
		}
		if l.methods[m.key.service] == nil {
			l.methods[m.key.service] = map[string]*rate.Limiter{}
		}
		l.methods[m.key.service][m.key.method] = rate.NewLimiter(m.limit, max(m.burst, 1))
	}
	return l
}

// admitRate applies the rate limits to a call of service.method (as the
// caller named them: the limits come before the method is looked up). A
// call over a limit is refused with ResourceExhausted and the retry-after
// metadata; a oneway send (wait), which cannot be refused visibly, waits
// for a token instead, until done closes (then errClosed). A nil error
// admits the call.
func (s *Server) admitRate(service, method []byte, wait bool, done context.Context) (fleet.Metadata, error) {
	l := &s.rates
	if l.server == nil && l.methods == nil {
		return nil, nil
	}
	for _, lim := range [2]*rate.Limiter{l.server, l.methods[string(service)][string(method)]} {
		if lim == nil {
			continue
		}
		if wait {
			if lim.Wait(done) != nil {
				return nil, errClosed
			}
			continue
		}
		if lim.Allow() {
			continue
		}
		md := fleet.Metadata{RetryAfterKey: strconv.FormatInt(retryAfter(lim).Milliseconds(), 10)}
		return md, fleet.Errorf(fleet.ResourceExhausted, "rate limit of %g calls per second exceeded", float64(lim.Limit()))
	}
	return nil, nil
}

// retryAfter returns when lim will next have a token, rounded up to a
// millisecond.
func retryAfter(lim *rate.Limiter) time.Duration {
	r := lim.Reserve()
	d := r.Delay()
	r.Cancel()
	return (d + time.Millisecond - 1).Truncate(time.Millisecond)
}
