package selector

import (
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/fleetrpc/fleet/registry"
)

// counter counts one server's calls in flight from this client. It fills a
// cache line so that servers' counters do not falsely share one.
type counter struct {
	n atomic.Int64
	_ [56]byte
}

func (c *counter) begin() { c.n.Add(1) }

// end decrements, but not below zero: an End whose Begin went to a counter
// since replaced (the server left and came back) must not make the count
// negative. The count heals once the calls it missed have ended.
func (c *counter) end() {
	for {
		v := c.n.Load()
		if v <= 0 || c.n.CompareAndSwap(v, v-1) {
			return
		}
	}
}

func (c *counter) load() int64 { return max(c.n.Load(), 0) }

// NewLeastLoaded returns a Selector that chooses the server with the fewest
// calls in flight from this client, as counted by its Observer methods:
// Begin adds one to the server's count and End takes one away (counts are
// atomic and kept across Updates for servers that stay). Ties go to the
// server that reported the smaller registry.Load.InFlight, then to a
// uniformly random one of those still tied.
//
// The returned Selector also implements Observer; without Begin and End
// calls it degrades to choosing by reported load. Select scans every server
// once, so it costs O(n); it allocates nothing and never blocks. For
// hundreds of servers prefer NewP2C, which looks at two.
func NewLeastLoaded() Selector { return &leastLoaded{} }

type leastLoaded struct {
	snap atomic.Pointer[llSnapshot]
}

type llSnapshot struct {
	keys     []string
	reported []int64
	counts   []*counter
	byKey    map[string]*counter
}

func (s *leastLoaded) Update(servers []registry.Instance) {
	var old map[string]*counter
	if o := s.snap.Load(); o != nil {
		old = o.byKey
	}
	n := &llSnapshot{}
	n.byKey = carryOver(servers, old, func(in *registry.Instance, k string, c *counter) {
		n.keys = append(n.keys, k)
		n.reported = append(n.reported, in.Load.InFlight)
		n.counts = append(n.counts, c)
	})
	s.snap.Store(n)
}

func (s *leastLoaded) Select(p *Pick) string {
	sn := s.snap.Load()
	if sn == nil || len(sn.keys) == 0 {
		return ""
	}
	ex := excludeOf(p)
	best, ties := -1, 0
	var bestN, bestR int64
	for i, k := range sn.keys {
		if ex != nil && ex(k) {
			continue
		}
		c, r := sn.counts[i].load(), sn.reported[i]
		switch {
		case best < 0 || c < bestN || (c == bestN && r < bestR):
			best, bestN, bestR, ties = i, c, r, 1
		case c == bestN && r == bestR:
			ties++
			if rand.N(ties) == 0 {
				best = i
			}
		}
	}
	if best < 0 {
		return ""
	}
	return sn.keys[best]
}

// Begin counts a call sent to key. Unknown keys are ignored.
func (s *leastLoaded) Begin(key string) {
	if sn := s.snap.Load(); sn != nil {
		if c := sn.byKey[key]; c != nil {
			c.begin()
		}
	}
}

// End counts a call to key completed; latency and err are not used.
func (s *leastLoaded) End(key string, _ time.Duration, _ error) {
	if sn := s.snap.Load(); sn != nil {
		if c := sn.byKey[key]; c != nil {
			c.end()
		}
	}
}
