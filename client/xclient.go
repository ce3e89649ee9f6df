package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/selector"
	"github.com/sony/gobreaker/v2"
)

// FailMode says what an XClient does when a call fails.
type FailMode int

// The fail modes.
const (
	// Failover retries on another server (the default).
	Failover FailMode = iota
	// Failfast returns the first error.
	Failfast
	// Failtry retries on the same server.
	Failtry
	// Failbackup sends a backup request to a second server when the first
	// has not answered within the backup delay, and takes the first reply.
	Failbackup
)

// ParseFailMode maps "failover", "failfast", "failtry" and "failbackup" to
// their FailMode.
func ParseFailMode(s string) (FailMode, error) {
	switch s {
	case "failover":
		return Failover, nil
	case "failfast":
		return Failfast, nil
	case "failtry":
		return Failtry, nil
	case "failbackup":
		return Failbackup, nil
	}
	return 0, fmt.Errorf("client: unknown fail mode %q (failover, failfast, failtry, failbackup)", s)
}

// Governance errors; each matches with errors.Is.
var (
	// ErrNoServer: discovery lists no server that can take the call.
	ErrNoServer = fleet.NewError(fleet.Unavailable, "no server available")
	// ErrBudgetExhausted is wrapped when a retry was refused by the
	// retry budget.
	ErrBudgetExhausted = errors.New("retry budget exhausted")
)

// XClient calls one service over the servers a Discovery lists: it picks a
// server per call with a Selector, keeps one lazily dialled connection per
// server (closed when the server leaves discovery and its calls finish),
// skips servers whose connection failed or whose circuit breaker is open,
// and retries by its FailMode within the call's deadline and a retry
// budget. Safe for concurrent use.
type XClient struct {
	service string
	disc    registry.Discovery
	opts    xoptions
	breaker BreakerSettings // opts.breaker, normalized
	sel     selector.Selector
	obs     selector.Observer

	endpoints atomic.Pointer[map[string]*endpoint]
	mu        sync.Mutex // serialises updates of endpoints
	ready     chan struct{}
	readyOnce sync.Once
	cancel    context.CancelFunc
	watchDone chan struct{}
	lat       latencyWindow
	pool      sync.Pool
}

// NewXClient returns an XClient for service over the servers disc lists.
// It starts watching at once and returns after the first list arrives or
// after a second, whichever is first (calls made before any server is
// known wait for the first list, bounded by their context).
func NewXClient(service string, disc registry.Discovery, opts ...XOption) (*XClient, error) {
	o := xoptions{
		failMode: Failover, maxAttempts: 3,
		backoffBase: 5 * time.Millisecond, backoffMax: 500 * time.Millisecond,
		idempotent: map[string]bool{}, downFor: time.Second, drainTimeout: 30 * time.Second,
	}
	for _, op := range opts {
		op.applyX(&o)
	}
	if o.sel == nil {
		o.sel = selector.NewP2C(selector.P2CConfig{})
	}
	if o.budget == nil {
		o.budget = NewRetryBudget(0.1, 10, 10*time.Second)
	}
	x := &XClient{service: service, disc: disc, opts: o, ready: make(chan struct{}), watchDone: make(chan struct{})}
	x.sel = o.sel
	x.breaker = o.breaker.normalized()
	if len(o.filters) > 0 {
		x.sel = selector.Filtered(o.sel, o.filters...)
	}
	x.obs, _ = x.sel.(selector.Observer)
	empty := map[string]*endpoint{}
	x.endpoints.Store(&empty)
	x.pool.New = func() any {
		a := &attempt{x: x}
		a.pick.Exclude = a.exclude
		return a
	}
	ctx, cancel := context.WithCancel(context.Background())
	x.cancel = cancel
	ch, err := disc.Watch(ctx, service)
	if err != nil {
		cancel()
		return nil, fleet.Errorf(fleet.Unavailable, "watch %s: %w", service, err)
	}
	go x.watch(ch)
	select {
	case <-x.ready:
	case <-time.After(time.Second):
	}
	return x, nil
}

// CallKey returns a context whose XClient calls use key for consistent
// hashing (selector.NewConsistentHash).
func CallKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, callKeyKey{}, key)
}

type callKeyKey struct{}

// Call calls service.method on one server chosen by the selector, retrying
// by the fail mode. Errors are those of Client.Call, or Unavailable
// wrapping ErrNoServer when no server can be chosen.
func (x *XClient) Call(ctx context.Context, method string, args, reply any) error {
	ctx, cancel, s := x.settings(ctx, method)
	if cancel != nil {
		defer cancel()
	}
	if s.hedged {
		return x.backup(ctx, &s, method, args, reply)
	}
	a := x.pool.Get().(*attempt)
	a.start(ctx, &s)
	defer x.release(a)
	s.budget.Call()
	var ep *endpoint
	var err error
	for i := 0; ; i++ {
		if ep == nil || s.failMode != Failtry {
			if ep, err = x.choose(ctx, a, method); err != nil {
				return err
			}
		}
		err = x.attemptOne(ctx, &s, ep, method, args, reply)
		for r := 0; r < 3 && repick(err) && ctx.Err() == nil; r++ {
			if ep, err = x.choose(ctx, a, method); err != nil {
				return err
			}
			err = x.attemptOne(ctx, &s, ep, method, args, reply)
		}
		if err == nil || s.failMode == Failfast || i+1 >= s.maxAttempts || ctx.Err() != nil {
			return err
		}
		if !x.retryableFor(&s, err, method) {
			return err
		}
		if !x.crashFailover(a, ep, err) && !x.shedFailover(a, ep, err) && !s.budget.Retry() {
			return fmt.Errorf("%w (%w)", err, ErrBudgetExhausted)
		}
		if x.opts.observer != nil {
			x.opts.observer.OnRetry(x.service, method)
		}
		if s.failMode == Failover && a.ntried < len(a.tried) && !s.injected {
			a.tried[a.ntried] = ep.key
			a.ntried++
		}
		if i > 0 || s.failMode == Failtry {
			if werr := x.sleep(ctx, &s, i); werr != nil {
				return err
			}
		}
	}
}

// callOne makes one attempt on one server, feeding the breaker, the
// selector's observer and the latency window.
// cb is the breaker the attempt goes through (ep.breaker, or one a policy
// chose; nil: none).
func (x *XClient) callOne(ctx context.Context, ep *endpoint, cb *gobreaker.TwoStepCircuitBreaker[struct{}], method string, args, reply any) error {
	done := noBreaker
	if cb != nil {
		var berr error
		if done, berr = cb.Allow(); berr != nil {
			return notSent(fleet.Errorf(fleet.Unavailable, "circuit breaker open for %s: %w", ep.key, berr))
		}
	}
	c, err := x.client(ctx, ep)
	if err != nil {
		if repick(err) {
			done(nil) // gone, not unhealthy
		} else {
			done(err)
		}
		return err
	}
	if x.obs != nil {
		x.obs.Begin(ep.key)
	}
	start := time.Now()
	err = c.Call(ctx, x.service, method, args, reply)
	d := time.Since(start)
	if x.obs != nil {
		var oerr error
		if serverFailure(err) {
			oerr = err
		}
		x.obs.End(ep.key, d, oerr)
	}
	if err == nil && x.opts.failMode == Failbackup {
		x.lat.add(d)
	}
	if fleet.CodeOf(err) == fleet.Canceled {
		done(nil) // the caller's choice says nothing of the server
	} else {
		done(err)
	}
	return err
}

// Servers returns the keys of the servers currently listed, sorted.
func (x *XClient) Servers() []string {
	eps := x.sortedEndpoints()
	keys := make([]string, len(eps))
	for i, ep := range eps {
		keys[i] = ep.key
	}
	return keys
}

// Close stops watching discovery and closes every connection. It does not
// close the Discovery.
func (x *XClient) Close() error {
	x.cancel()
	<-x.watchDone
	x.mu.Lock()
	eps := *x.endpoints.Load()
	empty := map[string]*endpoint{}
	x.endpoints.Store(&empty)
	x.mu.Unlock()
	for _, ep := range eps {
		ep.mu.Lock()
		ep.removed = true
		c := ep.c
		ep.c = nil
		ep.mu.Unlock()
		if c != nil {
			c.Close()
		}
	}
	return nil
}
