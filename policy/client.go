package policy

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/registry"
)

// Current is what a client or server applier reads the policy in force
// from: a *Watcher, or Static for a fixed policy.
type Current interface {
	// Current returns the policy in force, nil when none.
	Current() *Policy
}

// Static is a Current that always returns P.
type Static struct{ P *Policy }

// Current returns s.P.
func (s Static) Current() *Policy { return s.P }

// Client applies the policy in force to one XClient's calls: it
// implements client.PolicySource, so pass client.WithPolicy(policy.NewClient(w))
// to client.NewXClient, one Client per XClient. For each call, the first
// route whose match accepts it (method, request metadata, percentage)
// chooses a destination subset by weight and restricts the call to that
// subset's servers, and sets the call's timeout, retry policy, hedging,
// injected faults and circuit-breaker thresholds; a call no route
// matches, or made while no policy is in force, keeps the XClient's
// defaults. A policy change applies from the
// next call on. Safe for concurrent use; Decide allocates nothing but the
// timeout's context.
type Client struct {
	cur     Current
	servers atomic.Pointer[[]registry.Instance]
	mu      sync.Mutex // serialises rebuilding state
	state   atomic.Pointer[clientState]
}

// clientState is the subset membership of the servers under one policy.
type clientState struct {
	pol     *Policy
	servers *[]registry.Instance
	allow   map[string]func(key string) bool // by subset name
}

// NewClient returns a Client applying the policy cur holds.
func NewClient(cur Current) *Client {
	c := &Client{cur: cur}
	empty := []registry.Instance{}
	c.servers.Store(&empty)
	return c
}

var _ client.PolicySource = (*Client)(nil)

// Update records the XClient's servers (client.PolicySource).
func (c *Client) Update(servers []registry.Instance) {
	list := slices.Clone(servers)
	c.servers.Store(&list)
	if p := c.cur.Current(); p != nil {
		c.rebuild(p)
	}
}

// stateFor returns the subset membership for p and the current servers,
// rebuilding it when either changed.
func (c *Client) stateFor(p *Policy) *clientState {
	if st := c.state.Load(); st != nil && st.pol == p && st.servers == c.servers.Load() {
		return st
	}
	return c.rebuild(p)
}

func (c *Client) rebuild(p *Policy) *clientState {
	c.mu.Lock()
	defer c.mu.Unlock()
	servers := c.servers.Load()
	if st := c.state.Load(); st != nil && st.pol == p && st.servers == servers {
		return st
	}
	st := &clientState{pol: p, servers: servers, allow: make(map[string]func(string) bool, len(p.subsets))}
	for name, sub := range p.subsets {
		members := map[string]bool{}
		for _, in := range *servers {
			if sub.Holds(in) {
				members[in.Key()] = true
			}
		}
		st.allow[name] = func(key string) bool { return members[key] }
	}
	c.state.Store(st)
	return st
}

// Holds reports whether the subset holds in: in carries every one of
// s.Tags, and s.Version and s.Group when they are set.
func (s Subset) Holds(in registry.Instance) bool {
	if s.Version != "" && in.Version != s.Version {
		return false
	}
	if s.Group != "" && in.Group != s.Group {
		return false
	}
	for _, t := range s.Tags {
		if !slices.Contains(in.Tags, t) {
			return false
		}
	}
	return true
}

// Decide returns the policy's decision for one call (client.PolicySource).
func (c *Client) Decide(ctx context.Context, method string) client.CallPolicy {
	p := c.cur.Current()
	if p == nil {
		return client.CallPolicy{}
	}
	r := p.match(ctx, method)
	if r == nil {
		return client.CallPolicy{}
	}
	cp := client.CallPolicy{Timeout: r.timeout, Retry: r.retry, Hedge: r.hedge, Fault: r.fault, Breaker: r.breaker}
	if len(r.dests) > 0 {
		st := c.stateFor(p)
		cp.Allow = st.allow[r.pick()]
	}
	return cp
}

// Route returns the name (or "#index" when unnamed) of the route that
// matches a call of method with ctx's request metadata, "" when none does.
// A route with a percentage is drawn at random, as for a call.
func (p *Policy) Route(ctx context.Context, method string) string {
	r := p.match(ctx, method)
	if r == nil {
		return ""
	}
	return r.name
}

// match returns the first route that matches the call, nil when none.
func (p *Policy) match(ctx context.Context, method string) *route {
	for i := range p.routes {
		r := &p.routes[i]
		if r.method != "" && r.method != method {
			continue
		}
		ok := true
		for j := range r.headers {
			if !r.headers[j].matches(ctx) {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		if r.percent >= 0 && !chance(r.percent) {
			continue
		}
		return r
	}
	return nil
}

func (h *headerMatch) matches(ctx context.Context) bool {
	v, ok := fleet.LookupOutgoing(ctx, h.Name)
	var m bool
	switch {
	case h.Present:
		m = ok
	case !ok:
		m = false
	case h.Exact != "":
		m = v == h.Exact
	case h.Prefix != "":
		m = strings.HasPrefix(v, h.Prefix)
	case h.re != nil:
		m = h.re.MatchString(v)
	}
	return m != h.Invert
}

// pick draws a destination subset by weight.
func (r *route) pick() string {
	n := rand.N(r.total)
	for _, d := range r.dests {
		if n < d.Weight {
			return d.Subset
		}
		n -= d.Weight
	}
	return r.dests[len(r.dests)-1].Subset
}
