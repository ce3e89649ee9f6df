package client

import (
	"errors"
	"strconv"
	"time"

	"github.com/fleetrpc/fleet"
)

// ErrShed is wrapped by the error of a call that an overloaded server
// refused before running it: code ResourceExhausted with the response
// metadata RetryAfterKey, as the server's rate limits
// (server.WithRateLimit) and adaptive concurrency limit
// (server.WithAdaptiveLimit) answer. The call did not run, so an XClient
// fails it over like a call that was not sent. Test with errors.Is; read
// the hint with RetryAfter.
var ErrShed = errors.New("call shed by an overloaded server")

// RetryAfterKey is the response metadata key, in milliseconds as a decimal
// string, by which a server says a ResourceExhausted answer refused the
// call unprocessed and when to retry (the same key as
// server.RetryAfterKey). A handler must not set it on a call it ran.
const RetryAfterKey = "retry-after-ms"

// shedError is a ResourceExhausted answer carrying the retry-after hint.
type shedError struct {
	e     *fleet.Error
	after time.Duration
}

func (e *shedError) Error() string   { return e.e.Error() }
func (e *shedError) Unwrap() []error { return []error{e.e, ErrShed} }

// asShed turns a server's error answer into a shedError when it is
// ResourceExhausted with the retry-after hint; else it returns e.
func asShed(e *fleet.Error, md fleet.Metadata) error {
	if e.Code() != fleet.ResourceExhausted {
		return e
	}
	v, ok := md[RetryAfterKey]
	if !ok {
		return e
	}
	ms, _ := strconv.ParseInt(v, 10, 64)
	return &shedError{e: e, after: time.Duration(max(ms, 0)) * time.Millisecond}
}

// RetryAfter returns the time after which the server that shed the call
// failed by err suggested a retry, and whether err is such a refusal
// (wraps ErrShed). A hint that does not parse reads as 0.
func RetryAfter(err error) (time.Duration, bool) {
	var se *shedError
	if errors.As(err, &se) {
		return se.after, true
	}
	return 0, false
}

// shedFailover reports whether a retry after err, which failed an attempt
// on ep, is the failover of a shed call, which the retry budget does not
// count: the fail mode is Failover, err wraps ErrShed (the server refused
// the call before running it), and another server remains usable and
// untried by this call. The shedding server is not marked down: it is
// busy, not gone. Why exempt: a shed costs the refusing server a frame
// read and a refusal, not a handler, and each call tries each server at
// most once before the budget applies, so the extra load is bounded by
// the number of servers in cheap refusals; counting these retries would
// fail calls that another server has room for.
func (x *XClient) shedFailover(a *attempt, ep *endpoint, err error) bool {
	if x.opts.failMode != Failover || !errors.Is(err, ErrShed) {
		return false
	}
	return x.otherUsable(a, ep, time.Now().UnixNano())
}
