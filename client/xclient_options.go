package client

import (
	"time"

	"github.com/fleetrpc/fleet/selector"
)

// XOption configures an XClient.
type XOption interface{ applyX(*xoptions) }

type xoptionFunc func(*xoptions)

func (f xoptionFunc) applyX(o *xoptions) { f(o) }

type xoptions struct {
	sel          selector.Selector
	filters      []selector.Filter
	failMode     FailMode
	maxAttempts  int
	backoffBase  time.Duration
	backoffMax   time.Duration
	budget       *RetryBudget
	breaker      BreakerSettings
	backupDelay  time.Duration
	idempotent   map[string]bool
	clientOpts   []Option
	downFor      time.Duration
	drainTimeout time.Duration
	observer     XObserver
	policy       PolicySource
}

// WithSelector chooses servers with sel. Default: selector.NewP2C (latency
// aware power of two choices).
func WithSelector(sel selector.Selector) XOption {
	return xoptionFunc(func(o *xoptions) { o.sel = sel })
}

// WithFilters keeps only the servers every filter accepts (group, version,
// tags). Default: all servers.
func WithFilters(f ...selector.Filter) XOption {
	return xoptionFunc(func(o *xoptions) { o.filters = append(o.filters, f...) })
}

// WithFailMode sets the fail mode. Default Failover.
func WithFailMode(m FailMode) XOption { return xoptionFunc(func(o *xoptions) { o.failMode = m }) }

// WithMaxAttempts bounds the attempts of one call, the first included.
// Default 3.
func WithMaxAttempts(n int) XOption {
	return xoptionFunc(func(o *xoptions) { o.maxAttempts = max(1, n) })
}

// WithBackoff sets the retry backoff: before retry k the client sleeps a
// random time in [0, min(max, base·2^(k-1))] ("full jitter"). The first
// failover retry goes to another server at once. Default 5 ms and 500 ms.
func WithBackoff(base, max time.Duration) XOption {
	return xoptionFunc(func(o *xoptions) { o.backoffBase, o.backoffMax = base, max })
}

// WithRetryBudget replaces the retry budget. Default NewRetryBudget(0.1,
// 10, 10*time.Second): retries at most 10% of calls over 10 s. The
// failover of a call whose server's connection failed (the server is then
// marked down) is not counted while another usable server remains, so a
// crashed server's calls always fail over; see docs/hardening.md.
func WithRetryBudget(b *RetryBudget) XOption { return xoptionFunc(func(o *xoptions) { o.budget = b }) }

// WithBreaker sets the per-server circuit breaker (see BreakerSettings).
// Default BreakerSettings{}: open after 5 consecutive server failures,
// probe again after 5 s with one request. Server failures are answers
// with code Unavailable, ShuttingDown, DeadlineExceeded or Internal; a
// failed dial or a lost connection is not one (the server is marked down
// instead, see WithDownTime).
func WithBreaker(st BreakerSettings) XOption {
	return xoptionFunc(func(o *xoptions) { o.breaker = st })
}

// WithBackupDelay sets Failbackup's delay before the backup request.
// Default 0: the observed p95 latency (10 ms until enough calls are seen).
func WithBackupDelay(d time.Duration) XOption {
	return xoptionFunc(func(o *xoptions) { o.backupDelay = d })
}

// WithIdempotent marks methods safe to run twice: their calls are also
// retried after the request was sent (a lost connection, DeadlineExceeded
// of an attempt is not retried since it spends the caller's deadline).
// Default: none; only calls that certainly did not run are retried.
func WithIdempotent(methods ...string) XOption {
	return xoptionFunc(func(o *xoptions) {
		for _, m := range methods {
			o.idempotent[m] = true
		}
	})
}

// WithClientOptions sets the options of each server connection.
func WithClientOptions(opts ...Option) XOption {
	return xoptionFunc(func(o *xoptions) { o.clientOpts = append(o.clientOpts, opts...) })
}

// WithDownTime sets how long a server whose connection failed or could
// not be dialled is skipped before it is tried again. Default 1 s.
func WithDownTime(d time.Duration) XOption { return xoptionFunc(func(o *xoptions) { o.downFor = d }) }
