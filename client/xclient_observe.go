package client

import (
	"sort"
)

// XObserver receives an XClient's governance events, for metrics. Its
// methods run on the goroutine that caused the event (a caller, or the
// discovery watcher for OnServers), so they must be quick and safe for
// concurrent use. service is the XClient's service; server is a server's
// registry key (registry.Instance.Key).
type XObserver interface {
	// OnServers is called each time discovery delivers a new list, with
	// the keys of the servers now known, sorted.
	OnServers(service string, servers []string)
	// OnPick is called each time a server is chosen for an attempt.
	OnPick(service, server string)
	// OnRetry is called before each attempt after the first of a Failover
	// or Failtry call (not for a quick re-pick after a server left).
	OnRetry(service, method string)
	// OnBackup is called when a Failbackup call sends its backup request.
	OnBackup(service, method string)
}

// BreakerObserver is an optional ability of an XObserver: OnBreakerState is
// called when a server's circuit breaker changes state (while the breaker
// holds its lock: it must not call into the XClient).
type BreakerObserver interface {
	OnBreakerState(service, server string, from, to BreakerState)
}

// WithObserver reports the XClient's governance events to o (which may
// also implement BreakerObserver). Default: none.
func WithObserver(o XObserver) XOption {
	return xoptionFunc(func(x *xoptions) { x.observer = o })
}

// XOptions groups several XClient options into one, applied in order, so
// an integration can install an interceptor and an observer with one
// option. A nil entry is skipped.
func XOptions(opts ...XOption) XOption {
	return xoptionFunc(func(o *xoptions) {
		for _, op := range opts {
			if op != nil {
				op.applyX(o)
			}
		}
	})
}

// observeServers reports a new server list.
func (x *XClient) observeServers(eps map[string]*endpoint) {
	keys := make([]string, 0, len(eps))
	for k := range eps {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	x.opts.observer.OnServers(x.service, keys)
}

// breakerHook returns the callback that reports a server's breaker state
// changes to the observer, or nil when there is no BreakerObserver.
func (x *XClient) breakerHook(server string) func(from, to BreakerState) {
	bo, ok := x.opts.observer.(BreakerObserver)
	if !ok {
		return nil
	}
	return func(from, to BreakerState) { bo.OnBreakerState(x.service, server, from, to) }
}
