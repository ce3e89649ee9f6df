package selector

import (
	"slices"
	"time"

	"github.com/fleetrpc/fleet/registry"
)

// Filter reports whether a selector may choose an instance. Filters run in
// Update, never in Select, and must not retain the instance.
type Filter func(registry.Instance) bool

// ByGroup returns a Filter that keeps the instances whose Group is g.
func ByGroup(g string) Filter {
	return func(in registry.Instance) bool { return in.Group == g }
}

// ByVersion returns a Filter that keeps the instances whose Version is v.
func ByVersion(v string) Filter {
	return func(in registry.Instance) bool { return in.Version == v }
}

// ByTags returns a Filter that keeps the instances that carry every one of
// tags (and perhaps others); with no tags it keeps every instance.
func ByTags(tags ...string) Filter {
	want := slices.Clone(tags)
	return func(in registry.Instance) bool {
		for _, t := range want {
			if !slices.Contains(in.Tags, t) {
				return false
			}
		}
		return true
	}
}

// Filtered returns a Selector that passes to sel's Update only the instances
// every filter keeps, and otherwise behaves as sel: Select is sel's, so it
// stays free of filtering cost. When sel implements Observer, so does the
// returned Selector. It is safe for concurrent use when sel is; the filters
// run only in Update, and concurrently only when Update is called
// concurrently.
func Filtered(sel Selector, filters ...Filter) Selector {
	f := filtered{sel: sel, filters: slices.Clone(filters)}
	if o, ok := sel.(Observer); ok {
		return &filteredObserver{filtered: f, obs: o}
	}
	return &f
}

type filtered struct {
	sel     Selector
	filters []Filter
}

func (f *filtered) Select(p *Pick) string { return f.sel.Select(p) }

func (f *filtered) Update(servers []registry.Instance) {
	kept := make([]registry.Instance, 0, len(servers))
next:
	for _, in := range servers {
		for _, keep := range f.filters {
			if !keep(in) {
				continue next
			}
		}
		kept = append(kept, in)
	}
	f.sel.Update(kept)
}

type filteredObserver struct {
	filtered
	obs Observer
}

func (f *filteredObserver) Begin(key string) { f.obs.Begin(key) }

func (f *filteredObserver) End(key string, latency time.Duration, err error) {
	f.obs.End(key, latency, err)
}
