package selector

import (
	"math/rand/v2"
	"time"

	"github.com/fleetrpc/fleet/registry"
)

// usable reports whether a selector may ever choose in: it has a key and is
// not draining.
func usable(in *registry.Instance) bool {
	return in.State != registry.Draining && in.Key() != ""
}

// usableKeys returns the keys of the usable instances, in order.
func usableKeys(servers []registry.Instance) []string {
	keys := make([]string, 0, len(servers))
	for i := range servers {
		if usable(&servers[i]) {
			keys = append(keys, servers[i].Key())
		}
	}
	return keys
}

// carryOver walks the usable servers with distinct keys, in order, and
// calls add with each one and its state: the state old held for that key
// when the server stays, else a new zero S. It returns the new key→state
// map, so per-server counters and averages survive an Update.
func carryOver[S any](servers []registry.Instance, old map[string]*S, add func(in *registry.Instance, key string, st *S)) map[string]*S {
	byKey := make(map[string]*S, len(servers))
	for i := range servers {
		in := &servers[i]
		if !usable(in) {
			continue
		}
		k := in.Key()
		if _, dup := byKey[k]; dup {
			continue
		}
		st := old[k]
		if st == nil {
			st = new(S)
		}
		byKey[k] = st
		add(in, k, st)
	}
	return byKey
}

// excludeOf returns p's exclusion function, nil when p is nil or has none.
func excludeOf(p *Pick) func(string) bool {
	if p == nil {
		return nil
	}
	return p.Exclude
}

// pickOne returns a uniformly random key among those ex does not exclude,
// or "" when ex excludes them all. It calls ex once per key (reservoir
// sampling of size one) and allocates nothing.
func pickOne(keys []string, ex func(string) bool) string {
	chosen, seen := "", 0
	for _, k := range keys {
		if ex(k) {
			continue
		}
		seen++
		if seen == 1 || rand.N(seen) == 0 {
			chosen = k
		}
	}
	return chosen
}

// bitset is a fixed-size set of small indexes that lives on the stack, used
// to remember which servers a Pick excluded without allocating.
type bitset [bitsetSize / 64]uint64

// bitsetSize is how many indexes a bitset holds; selectors fall back to
// asking Pick.Exclude again for servers beyond it.
const bitsetSize = 1024

func (b *bitset) has(i int) bool { return b[i>>6]&(1<<(uint(i)&63)) != 0 }
func (b *bitset) set(i int)      { b[i>>6] |= 1 << (uint(i) & 63) }

// epoch is the origin of nanotime; time.Since reads the monotonic clock.
var epoch = time.Now()

// nanotime returns monotonic nanoseconds since the package was loaded,
// always at least 1 so that 0 can mean "never".
func nanotime() int64 { return int64(time.Since(epoch)) + 1 }
