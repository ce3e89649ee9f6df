package client

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/selector"
	"github.com/sony/gobreaker/v2"
)

// endpoint is one server of an XClient's discovery list: its instance, its
// circuit breaker, its lazily dialled connection and how long it is skipped
// after a connection failure. This file holds the endpoint set (updates
// from discovery, retirement) and the choice of an endpoint for an attempt.
type endpoint struct {
	inst      registry.Instance
	key       string
	breaker   *gobreaker.TwoStepCircuitBreaker[struct{}]
	pbs       atomic.Pointer[[]*policyBreaker] // breakers for policies' settings; copied on write under mu
	downUntil atomic.Int64                     // unix nanoseconds; skipped until then
	mu        sync.Mutex
	c         *Client
	removed   bool
}

func (x *XClient) watch(ch <-chan []registry.Instance) {
	defer close(x.watchDone)
	for list := range ch {
		x.update(list)
	}
}

// update applies a new server list: the selector's snapshot and the
// endpoint table. Servers that left are closed once their calls finish.
func (x *XClient) update(list []registry.Instance) {
	x.mu.Lock()
	defer x.mu.Unlock()
	old := *x.endpoints.Load()
	next := make(map[string]*endpoint, len(list))
	for _, in := range list {
		k := in.Key()
		if ep, ok := old[k]; ok {
			ep.mu.Lock()
			ep.inst = in
			ep.mu.Unlock()
			next[k] = ep
			continue
		}
		next[k] = x.newEndpoint(in)
	}
	if x.opts.policy != nil {
		x.opts.policy.Update(list)
	}
	x.endpoints.Store(&next)
	x.sel.Update(list)
	if x.opts.observer != nil {
		x.observeServers(next)
	}
	for k, ep := range old {
		if _, ok := next[k]; !ok {
			go ep.retire(x.opts.drainTimeout)
		}
	}
	if len(list) > 0 {
		x.readyOnce.Do(func() { close(x.ready) })
	}
}

func (x *XClient) newEndpoint(in registry.Instance) *endpoint {
	ep := &endpoint{inst: in, key: in.Key()}
	ep.breaker = newBreaker(ep.key, x.opts.breaker, x.breakerHook(ep.key))
	return ep
}

// serverFailure reports whether err says the server is unhealthy, as
// opposed to the call itself being refused or cancelled.
func serverFailure(err error) bool {
	switch fleet.CodeOf(err) {
	case fleet.Unavailable, fleet.ShuttingDown, fleet.DeadlineExceeded, fleet.Internal:
		return true
	}
	return false
}

// retire closes the endpoint's connection once its pending calls finish
// (bounded by timeout).
func (ep *endpoint) retire(timeout time.Duration) {
	ep.mu.Lock()
	ep.removed = true
	c := ep.c
	ep.c = nil
	ep.mu.Unlock()
	if c == nil {
		return
	}
	deadline := time.Now().Add(timeout)
	for c.Pending() > 0 && time.Now().Before(deadline) {
		select {
		case <-c.Done():
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
	c.Close()
}

// usable reports whether the endpoint may be chosen now for a call whose
// breaker settings are brk (nil: the XClient's own).
func (ep *endpoint) usable(now int64, brk *BreakerSettings) bool {
	if ep.downUntil.Load() > now {
		return false
	}
	if ep.breakerOpen(brk) {
		return false
	}
	ep.mu.Lock()
	c := ep.c
	ep.mu.Unlock()
	return c == nil || (c.Err() == nil && !c.Draining())
}

// client returns the endpoint's connection, dialling it if needed.
func (x *XClient) client(ctx context.Context, ep *endpoint) (*Client, error) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if ep.removed {
		return nil, errLeft
	}
	if ep.c != nil && ep.c.Err() == nil && !ep.c.Draining() {
		return ep.c, nil
	}
	if ep.c != nil {
		go ep.c.Close()
		ep.c = nil
	}
	network, addr := instanceNetwork(ep.inst)
	c, err := Dial(ctx, network, addr, x.opts.clientOpts...)
	if err != nil {
		ep.markDown(x.opts.downFor)
		return nil, notSent(err)
	}
	ep.c = c
	go func() {
		<-c.Done()
		ep.mu.Lock()
		broken := ep.c == c && !ep.removed
		ep.mu.Unlock()
		if broken && !errors.Is(c.Err(), ErrClosed) {
			ep.markDown(x.opts.downFor)
		}
	}()
	return c, nil
}

func (ep *endpoint) markDown(d time.Duration) { ep.downUntil.Store(time.Now().Add(d).UnixNano()) }

// errLeft: the chosen server left discovery before the call was sent.
var errLeft = notSent(fleet.NewError(fleet.Unavailable, "server left discovery"))

// repick reports whether err means the chosen server was gone before the
// call was sent (it left discovery, or announced shutdown): choosing again
// is not a retry, whatever the fail mode.
func repick(err error) bool { return err == errLeft || errors.Is(err, ErrGoingAway) }

// attempt is the per-call selection state, pooled.
type attempt struct {
	x      *XClient
	pick   selector.Pick
	tried  [8]string
	ntried int
	strict bool              // also skip servers that are down or tripped
	allow  func(string) bool // the policy's servers; nil: all
	brk    *BreakerSettings  // the call's breaker settings (&brkVal); nil: the XClient's own
	brkVal BreakerSettings
	now    int64
	eps    map[string]*endpoint
}

// start readies a pooled attempt for a call with settings s.
func (a *attempt) start(ctx context.Context, s *callSettings) {
	a.ntried = 0
	a.allow = s.allow
	a.brk = nil
	if s.ownBreaker {
		a.brkVal = s.breaker
		a.brk = &a.brkVal
	}
	a.pick.Key, _ = ctx.Value(callKeyKey{}).(string)
}

// release returns a to the pool, dropping what it holds of the call.
func (x *XClient) release(a *attempt) {
	a.allow, a.brk = nil, nil
	x.pool.Put(a)
}

// noBreaker is the outcome function of an attempt made without a breaker.
func noBreaker(error) {}

func (a *attempt) exclude(key string) bool {
	if a.allow != nil && !a.allow(key) {
		return true
	}
	for i := 0; i < a.ntried && i < len(a.tried); i++ {
		if a.tried[i] == key {
			return true
		}
	}
	if a.strict {
		if ep := a.eps[key]; ep == nil || !ep.usable(a.now, a.brk) {
			return true
		}
	}
	return false
}

// choose picks a server not yet tried, preferring usable ones.
func (x *XClient) choose(ctx context.Context, a *attempt, method string) (*endpoint, error) {
	for try := 0; ; try++ {
		a.eps = *x.endpoints.Load()
		if len(a.eps) == 0 {
			select {
			case <-x.ready:
				return nil, notSent(ErrNoServer)
			case <-ctx.Done():
				return nil, fleet.FromContextError(ctx.Err())
			case <-x.watchDone:
				return nil, notSent(ErrClosed)
			}
		}
		a.pick.Service, a.pick.Method = x.service, method
		a.now = time.Now().UnixNano()
		a.strict = true
		key := x.sel.Select(&a.pick)
		if key == "" {
			a.strict = false
			key = x.sel.Select(&a.pick)
		}
		if key == "" {
			return nil, notSent(ErrNoServer)
		}
		if ep := a.eps[key]; ep != nil {
			if x.opts.observer != nil {
				x.opts.observer.OnPick(x.service, key)
			}
			return ep, nil
		}
		// The table moved between the selector's snapshot and ours (or a
		// selector returned a key it was never given): look again, a few
		// times at most.
		if try >= 3 {
			return nil, notSent(ErrNoServer)
		}
	}
}
