package selector

import (
	"time"

	"github.com/fleetrpc/fleet/registry"
)

// Pick describes one selection. Callers reuse a Pick across attempts of
// one call; a Selector never retains it.
type Pick struct {
	Service string
	Method  string
	// Key is the consistent-hash key the caller chose; "" when none.
	Key string
	// Exclude, when not nil, reports servers (by registry.Instance.Key)
	// this pick must skip: ones already tried, or whose circuit breaker is
	// open. When every server is excluded Select returns "".
	Exclude func(key string) bool
}

// Selector chooses one server for each call. Select and Update may be
// called concurrently; Select never blocks on Update (implementations swap
// an immutable snapshot) and allocates nothing.
type Selector interface {
	// Select returns the chosen server's Key, or "" when none is available.
	Select(p *Pick) string
	// Update replaces the set of servers. The slice is not retained.
	Update(servers []registry.Instance)
}

// Observer is implemented by selectors that learn from outcomes
// (least-loaded, latency-aware). The client calls Begin when it sends a
// call to a server and End when the call completes.
type Observer interface {
	Begin(key string)
	End(key string, latency time.Duration, err error)
}
