package fleetotel

import (
	"sync"
	"sync/atomic"
)

// table maps (service, method) to a value made on first use. Reads are a
// lock-free load of a copy-on-write map of maps keyed by strings (hashed
// with the runtime's fast string hash, no allocation); writers, one per
// new method, serialise on mu and copy the two maps they change. The
// number of entries is the number of distinct methods seen, which the
// server bounds by refusing unknown methods before interceptors run.
type table[V any] struct {
	mu sync.Mutex
	m  atomic.Pointer[map[string]map[string]V]
}

// get returns the value of service.method, calling mk once to make it.
func (t *table[V]) get(service, method string, mk func() V) V {
	if p := t.m.Load(); p != nil {
		if v, ok := (*p)[service][method]; ok {
			return v
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var old map[string]map[string]V
	if p := t.m.Load(); p != nil {
		old = *p
	}
	if v, ok := old[service][method]; ok {
		return v
	}
	v := mk()
	next := make(map[string]map[string]V, len(old)+1)
	for k, ms := range old {
		next[k] = ms
	}
	ms := make(map[string]V, len(old[service])+1)
	for k, mv := range old[service] {
		ms[k] = mv
	}
	ms[method] = v
	next[service] = ms
	t.m.Store(&next)
	return v
}
