package client

import (
	"context"
	"slices"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/registry"
)

// PolicySource decides, call by call, how a traffic policy overrides an
// XClient's options (its code defaults): which servers may take the call,
// its timeout, its retries, hedging and injected faults. Package policy
// (module github.com/fleetrpc/fleet/policy) implements it from a policy
// document held in a registry or a file. Both methods may be called
// concurrently; Decide runs on every call and must not block.
type PolicySource interface {
	// Update is called with the XClient's full server list each time
	// discovery delivers one (before any call can choose a new server).
	// The slice is not retained.
	Update(servers []registry.Instance)
	// Decide returns what the policy says of one call of method; the
	// zero CallPolicy keeps every default.
	Decide(ctx context.Context, method string) CallPolicy
}

// CallPolicy is what a PolicySource decides for one call. Each zero field
// keeps the XClient's own setting.
type CallPolicy struct {
	// Allow, when not nil, restricts the call to the servers (by
	// registry.Instance.Key) it accepts, on every attempt; when it
	// accepts none of them the call fails with ErrNoServer.
	Allow func(key string) bool
	// Timeout, when positive, bounds the whole call (every attempt and
	// backoff) in addition to the caller's deadline.
	Timeout time.Duration
	// Retry, when not nil, replaces the fail mode's retry settings: the
	// call is retried on another server (Failover).
	Retry *RetryPolicy
	// Hedge, when not nil, sends the call to up to Hedge.MaxAttempts
	// servers, one more each Hedge.Delay until one answers, and takes
	// the first success (gRPC's hedging policy, gRFC A6).
	Hedge *HedgePolicy
	// Fault, when not nil, runs before each attempt: it may sleep (an
	// injected delay, bounded by ctx) and returns a non-nil error to fail
	// the attempt without sending it (an injected abort). The error is
	// the attempt's outcome, retried as any other.
	Fault func(ctx context.Context) error
	// Breaker, when not nil, sets the circuit breakers the call's
	// attempts go through: each server keeps one breaker per distinct
	// setting (besides its own, WithBreaker), which counts and refuses
	// only the calls made with that setting, and the selector skips a
	// server whose breaker for the call's setting is open. Each zero
	// field takes the XClient's own setting (WithBreaker), Disabled is
	// taken as it is; a setting equal to the XClient's own uses the
	// server's own breaker. A breaker keeps its state for as long as
	// calls come with its setting, whatever else changes; a server keeps
	// at most 8 such breakers, dropping the least recently used. These
	// breakers are not reported to a BreakerObserver.
	Breaker *BreakerSettings
}

// RetryPolicy is a per-call retry setting (gRPC's retryPolicy and Envoy's
// retry policy).
type RetryPolicy struct {
	// MaxAttempts bounds the attempts, the first included; at least 1.
	MaxAttempts int
	// Codes are the codes retried besides those XClient always retries
	// (not sent, ShuttingDown, shed, Unavailable refused unprocessed).
	Codes []fleet.Code
	// BackoffBase and BackoffMax are the full-jitter backoff (see
	// WithBackoff); zero keeps the XClient's.
	BackoffBase, BackoffMax time.Duration
	// Budget bounds the retries; nil keeps the XClient's budget.
	Budget *RetryBudget
}

// HedgePolicy sends a call to several servers in turn (see
// CallPolicy.Hedge).
type HedgePolicy struct {
	// MaxAttempts is how many servers at most receive the call, the
	// first included; at least 1.
	MaxAttempts int
	// Delay is the time between two sends; 0 sends the next at once
	// only when the previous failed with a retryable error.
	Delay time.Duration
}

// WithPolicy applies p to every call: p.Update sees every server list and
// p.Decide each call (see PolicySource). Default: none; only the options
// set in code apply.
func WithPolicy(p PolicySource) XOption {
	return xoptionFunc(func(o *xoptions) { o.policy = p })
}

// callSettings are the settings one call runs with: the XClient's options
// overridden by its CallPolicy.
type callSettings struct {
	failMode    FailMode
	maxAttempts int
	backoffBase time.Duration
	backoffMax  time.Duration
	budget      *RetryBudget
	codes       []fleet.Code
	allow       func(string) bool
	fault       func(context.Context) error
	hedged      bool            // Failbackup, or a policy's hedging
	hedge       HedgePolicy     // when hedged
	injected    bool            // the last attempt was failed by s.fault
	breaker     BreakerSettings // when ownBreaker: the call's breaker settings, normalized
	ownBreaker  bool            // a policy set breaker settings other than the XClient's
}

// settings returns the call's settings and its context (with the policy's
// timeout) and the cancel function to call when the call ends (nil when
// none).
func (x *XClient) settings(ctx context.Context, method string) (context.Context, context.CancelFunc, callSettings) {
	s := callSettings{
		failMode: x.opts.failMode, maxAttempts: x.opts.maxAttempts,
		backoffBase: x.opts.backoffBase, backoffMax: x.opts.backoffMax,
		budget: x.opts.budget,
	}
	if s.failMode == Failbackup {
		s.hedged, s.hedge = true, HedgePolicy{MaxAttempts: 2, Delay: x.opts.backupDelay}
	}
	if x.opts.policy == nil {
		return ctx, nil, s
	}
	cp := x.opts.policy.Decide(ctx, method)
	s.allow, s.fault = cp.Allow, cp.Fault
	if cp.Breaker != nil {
		if b := cp.Breaker.over(x.opts.breaker); b != x.breaker {
			s.breaker, s.ownBreaker = b, true
		}
	}
	if cp.Hedge != nil {
		s.hedged, s.hedge = true, *cp.Hedge
		s.hedge.MaxAttempts = max(1, s.hedge.MaxAttempts)
	}
	if r := cp.Retry; r != nil {
		s.failMode = Failover
		if cp.Hedge == nil {
			s.hedged = false
		}
		s.maxAttempts = max(1, r.MaxAttempts)
		s.codes = r.Codes
		if r.BackoffBase > 0 || r.BackoffMax > 0 {
			s.backoffBase, s.backoffMax = r.BackoffBase, r.BackoffMax
		}
		if r.Budget != nil {
			s.budget = r.Budget
		}
	}
	if cp.Timeout > 0 {
		ctx, cancel := context.WithTimeout(ctx, cp.Timeout)
		return ctx, cancel, s
	}
	return ctx, nil, s
}

// retryableFor reports whether err may be retried under s: XClient's own
// rule, or a code the call's retry policy names.
func (x *XClient) retryableFor(s *callSettings, err error, method string) bool {
	return x.retryable(err, method) || (len(s.codes) > 0 && slices.Contains(s.codes, fleet.CodeOf(err)))
}

// attemptOne runs the call's injected fault, if any, and then one attempt
// on ep, through the breaker of the call's settings. An injected abort does not reach the server, its breaker or the
// selector's observer, and does not count ep as tried: a retry may choose
// it again. attemptOne writes s.injected: concurrent attempts (backup)
// each pass their own copy of the settings.
func (x *XClient) attemptOne(ctx context.Context, s *callSettings, ep *endpoint, method string, args, reply any) error {
	s.injected = false
	if s.fault != nil {
		if err := s.fault(ctx); err != nil {
			s.injected = true
			return err
		}
	}
	return x.callOne(ctx, ep, x.breakerFor(ep, s), method, args, reply)
}
