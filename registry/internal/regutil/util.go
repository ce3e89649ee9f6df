package regutil

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fleetrpc/fleet/registry"
)

// ValidateService returns an error for a service name no backend can
// store: empty or holding a '/'.
func ValidateService(service string) error {
	switch {
	case service == "":
		return errors.New("registry: empty service name")
	case strings.ContainsRune(service, '/'):
		return fmt.Errorf("registry: service name %q contains '/'", service)
	}
	return nil
}

// Decode decodes a stored record and checks that it belongs to service.
func Decode(b []byte, service string) (registry.Instance, error) {
	in, err := registry.Unmarshal(b)
	if err != nil {
		return registry.Instance{}, err
	}
	if in.Service != service {
		return registry.Instance{}, fmt.Errorf("registry: record of service %q found under service %q", in.Service, service)
	}
	return in, nil
}

// List returns the values of m sorted by Key.
func List(m map[string]registry.Instance) []registry.Instance {
	list := slices.Collect(maps.Values(m))
	if list == nil {
		list = []registry.Instance{}
	}
	registry.Sort(list)
	return list
}

// Equal reports whether two lists hold equal instances in the same order;
// nil and empty lists are equal.
func Equal(a, b []registry.Instance) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 {
		return true
	}
	return reflect.DeepEqual(a, b)
}

// Clone returns a deep copy of list: Tags and Meta are copied too.
func Clone(list []registry.Instance) []registry.Instance {
	if list == nil {
		return nil
	}
	out := make([]registry.Instance, len(list))
	for i, in := range list {
		out[i] = CloneInstance(in)
	}
	return out
}

// CloneInstance returns a deep copy of in.
func CloneInstance(in registry.Instance) registry.Instance {
	if in.Tags != nil {
		in.Tags = slices.Clone(in.Tags)
	}
	if in.Meta != nil {
		in.Meta = maps.Clone(in.Meta)
	}
	return in
}

// Logger returns l, or slog.Default() when l is nil, with the attribute
// registry=backend.
func Logger(l *slog.Logger, backend string) *slog.Logger {
	if l == nil {
		l = slog.Default()
	}
	return l.With("registry", backend)
}

// Backoff computes retry delays: exponential from Min (default 100ms) to
// Max (default 5s), each with up to 50% random jitter subtracted. The zero
// value is ready to use; it is not safe for concurrent use.
type Backoff struct {
	Min time.Duration // first delay; default 100ms
	Max time.Duration // largest delay; default 5s
	cur time.Duration
}

// Next returns the delay before the next retry.
func (b *Backoff) Next() time.Duration {
	lo, hi := b.Min, b.Max
	if lo <= 0 {
		lo = 100 * time.Millisecond
	}
	if hi <= 0 {
		hi = 5 * time.Second
	}
	if hi < lo {
		hi = lo
	}
	switch {
	case b.cur < lo:
		b.cur = lo
	case b.cur < hi:
		b.cur = min(2*b.cur, hi)
	}
	return b.cur - rand.N(b.cur/2+1)
}

// Reset starts the delays over from Min.
func (b *Backoff) Reset() { b.cur = 0 }

// Sleep waits for d or until ctx is done; it reports whether it waited
// the full d.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Signal is a broadcast: every receiver of the channel returned by C
// before a Fire sees it closed by that Fire. The zero value is ready.
type Signal struct {
	mu sync.Mutex
	ch chan struct{}
}

// C returns the channel the next Fire closes.
func (s *Signal) C() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

// Fire wakes every receiver waiting on a channel from C.
func (s *Signal) Fire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
}

// Cache keeps the last list a Discovery read for each service, so
// Instances can answer while the registry is unreachable. The zero value
// is ready.
type Cache struct {
	mu sync.Mutex
	m  map[string][]registry.Instance
}

// Put records list as the current list of service.
func (c *Cache) Put(service string, list []registry.Instance) {
	list = Clone(list)
	if list == nil {
		list = []registry.Instance{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string][]registry.Instance)
	}
	c.m[service] = list
}

// Share records list as the current list of service without copying it:
// the caller and everyone else must never modify list or its instances'
// Tags and Meta afterwards (a list from Sorted.List qualifies). Get still
// returns a deep copy.
func (c *Cache) Share(service string, list []registry.Instance) {
	if list == nil {
		list = []registry.Instance{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string][]registry.Instance)
	}
	c.m[service] = list
}

// Get returns a copy of the last list recorded for service.
func (c *Cache) Get(service string) ([]registry.Instance, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	list, ok := c.m[service]
	return Clone(list), ok
}

// Fallback is what Instances returns when reading the registry failed
// with err: the last list recorded for service if there is one and the
// caller's ctx is still live (logged at Warn on log), else err.
func (c *Cache) Fallback(ctx context.Context, service string, err error, log *slog.Logger) ([]registry.Instance, error) {
	if ctx.Err() != nil || errors.Is(err, registry.ErrClosed) {
		return nil, err
	}
	list, ok := c.Get(service)
	if !ok {
		return nil, err
	}
	log.Warn("registry unreachable; returning the last known instances", "service", service, "instances", len(list), "err", err)
	return list, nil
}

// Names returns the keys of set sorted; an empty set gives an empty,
// non-nil list.
func Names(set map[string]struct{}) []string {
	names := slices.Sorted(maps.Keys(set))
	if names == nil {
		names = []string{}
	}
	return names
}
