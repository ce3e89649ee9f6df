package server

import (
	"context"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/fleetrpc/fleet"
	"golang.org/x/time/rate"
)

// RetryAfterKey is the response metadata key under which a call refused by
// a rate limit (WithRateLimit, WithMethodRateLimit, SetMethodLimits), by a
// method's concurrency cap (SetMethodLimits) or by the adaptive
// concurrency limit (WithAdaptiveLimit) carries the time, in milliseconds
// as a decimal string, after which a retry may be admitted. A
// ResourceExhausted answer carrying it means the call did not run (the
// client takes it as shed: client.ErrShed); handlers must not set it.
const RetryAfterKey = "retry-after-ms"

type rateKey struct{ service, method string }

type methodLimit struct {
	key rateKey
	MethodLimits
}

// serverRate is the server-wide rate limit (WithRateLimit): a token
// bucket (golang.org/x/time/rate) and the calls it refused. A nil
// *serverRate is no limit.
type serverRate struct {
	lim     *rate.Limiter
	refused atomic.Uint64
}

func newServerRate(o *options) *serverRate {
	if o.rate <= 0 {
		return nil
	}
	return &serverRate{lim: rate.NewLimiter(o.rate, max(o.rateBurst, 1))}
}

// Stats reports the server-wide rate limit (StageRate).
func (r *serverRate) Stats(dst []AdmissionStat) []AdmissionStat {
	return append(dst, rateStat(StageRate, "", "", r.lim, r.refused.Load()))
}

// rateStat is the AdmissionStat of a token bucket: its rate as the limit,
// the tokens missing from a full bucket (rounded up) as in use.
func rateStat(stage, service, method string, lim *rate.Limiter, refused uint64) AdmissionStat {
	used := int64(math.Ceil(float64(lim.Burst()) - lim.Tokens()))
	return AdmissionStat{Stage: stage, Service: service, Method: method, Limit: float64(lim.Limit()), InUse: max(used, 0), Refused: refused}
}

// admitLimits applies the rate limits and the method's concurrency cap to
// a call of service.method (as the caller named them: the limits come
// before the method is looked up), in this order: the server's rate limit
// (WithRateLimit), the method's rate limit, the method's concurrency cap
// (both from the table SetMethodLimits and WithMethodRateLimit fill). A
// call over a limit is refused with ResourceExhausted and the retry-after
// metadata; a oneway send (wait), which cannot be refused visibly, waits
// for a token or a slot instead, until done ends (then errClosed). A nil
// error admits the call; slot, when not nil, is the method's concurrency
// slot the call holds until it ends (slot.leave). Without limits it costs
// two loads and does not allocate.
func (s *Server) admitLimits(service, method []byte, wait bool, done context.Context) (slot *methodCounter, md fleet.Metadata, err error) {
	if r := s.rate; r != nil {
		if md, err := takeToken(r.lim, &r.refused, wait, done); err != nil {
			return nil, md, err
		}
	}
	t := s.methodLimits.Load()
	if t == nil {
		return nil, nil, nil
	}
	e := t.get(service, method)
	if e == nil {
		return nil, nil, nil
	}
	if e.rate != nil {
		if md, err := takeToken(e.rate, &e.ctr.rateRefused, wait, done); err != nil {
			return nil, md, err
		}
	}
	if e.max <= 0 {
		return nil, nil, nil
	}
	if e.ctr.tryEnter(e.max) {
		return e.ctr, nil, nil
	}
	if wait {
		slot, ok := s.waitMethodSlot(service, method, e.ctr, done)
		if !ok {
			return nil, nil, errClosed
		}
		return slot, nil, nil
	}
	e.ctr.capRefused.Add(1)
	return nil, fleet.Metadata{RetryAfterKey: strconv.Itoa(methodCapRetryAfterMs)},
		fleet.Errorf(fleet.ResourceExhausted, "more than %d concurrent calls of %s.%s", e.max, e.ctr.key.service, e.ctr.key.method)
}

// methodCapRetryAfterMs is the retry-after, in milliseconds, of a call
// refused by a method's concurrency cap: a slot frees when any running
// call of the method returns, which the server cannot foresee.
const methodCapRetryAfterMs = 1

// takeToken takes a token from lim: at once, or refused (counted in
// refused) with ResourceExhausted and the retry-after metadata; with wait,
// it waits for one until done ends (errClosed).
func takeToken(lim *rate.Limiter, refused *atomic.Uint64, wait bool, done context.Context) (fleet.Metadata, error) {
	if wait {
		if lim.Wait(done) != nil {
			return nil, errClosed
		}
		return nil, nil
	}
	if lim.Allow() {
		return nil, nil
	}
	refused.Add(1)
	md := fleet.Metadata{RetryAfterKey: strconv.FormatInt(retryAfter(lim).Milliseconds(), 10)}
	return md, fleet.Errorf(fleet.ResourceExhausted, "rate limit of %g calls per second exceeded", float64(lim.Limit()))
}

// retryAfter returns when lim will next have a token, rounded up to a
// millisecond.
func retryAfter(lim *rate.Limiter) time.Duration {
	r := lim.Reserve()
	d := r.Delay()
	r.Cancel()
	return (d + time.Millisecond - 1).Truncate(time.Millisecond)
}
