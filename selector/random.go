package selector

import (
	"math/rand/v2"
	"sync/atomic"

	"github.com/fleetrpc/fleet/registry"
)

// NewRandom returns a Selector that chooses uniformly at random among the
// servers not excluded, ignoring weights. Randomness comes from math/rand/v2's
// top-level functions, which are lock-free and safe for concurrent use; when
// the first draw is excluded, the choice is made uniformly among the
// remaining servers. Select allocates nothing and never blocks.
func NewRandom() Selector { return &random{} }

type random struct {
	snap atomic.Pointer[[]string]
}

func (s *random) Update(servers []registry.Instance) {
	keys := usableKeys(servers)
	s.snap.Store(&keys)
}

func (s *random) Select(p *Pick) string {
	sp := s.snap.Load()
	if sp == nil || len(*sp) == 0 {
		return ""
	}
	keys := *sp
	k := keys[rand.N(len(keys))]
	ex := excludeOf(p)
	if ex == nil || !ex(k) {
		return k
	}
	return pickOne(keys, ex)
}

// NewRoundRobin returns a Selector that chooses the servers in turn, in the
// order Update received them, from one atomic counter shared by all callers
// and kept across Updates. An excluded server is skipped in favour of the
// next one in order. Select allocates nothing and never blocks.
func NewRoundRobin() Selector { return &roundRobin{} }

type roundRobin struct {
	next atomic.Uint64
	snap atomic.Pointer[[]string]
}

func (s *roundRobin) Update(servers []registry.Instance) {
	keys := usableKeys(servers)
	s.snap.Store(&keys)
}

func (s *roundRobin) Select(p *Pick) string {
	sp := s.snap.Load()
	if sp == nil || len(*sp) == 0 {
		return ""
	}
	keys := *sp
	n := uint64(len(keys))
	start := (s.next.Add(1) - 1) % n
	ex := excludeOf(p)
	if ex == nil {
		return keys[start]
	}
	for i := uint64(0); i < n; i++ {
		j := start + i
		if j >= n {
			j -= n
		}
		if !ex(keys[j]) {
			return keys[j]
		}
	}
	return ""
}
