package selector

import (
	"sync"
	"sync/atomic"

	"github.com/fleetrpc/fleet/registry"
)

// NewWeightedRoundRobin returns a Selector that spreads calls in proportion
// to registry.Instance.EffectiveWeight with nginx's smooth weighted round
// robin (nginx commit 52327e0627f49dbda1e8db695e63a4b0af4448b1,
// ngx_http_upstream_get_peer in ngx_http_upstream_round_robin.c): on each
// pick every candidate's current weight grows by its weight, the candidate
// with the largest current weight wins (the first in Update order on a
// tie), and the winner's current weight drops by the candidates' total.
// From a fresh list, each run of sum(weights) picks chooses each server
// exactly its weight times, interleaved rather than in bursts: weights 5,
// 1, 1 for a, b, c give a a b a c a a. (After exclusions or a change of
// servers the counts in one run can differ, the long-run shares do not.)
//
// Excluded servers take no part in a pick, as nginx skips peers already
// tried. Unlike nginx the weights are fixed: failures do not lower them
// (use a circuit breaker's Exclude for that).
//
// The current weights are the one piece of mutable state: Select updates
// them under a mutex held for one loop over the servers, without
// allocating. Pick.Exclude is asked before the mutex is taken (for the
// first 1024 servers; beyond that, while it is held, so Exclude must not
// call back into the selector). Update never takes that mutex: it builds a new snapshot
// and carries over the current weights of servers it keeps, read
// atomically, so a list that changes often (as load reports do) does not
// restart the sequence. Select therefore never waits for Update.
func NewWeightedRoundRobin() Selector { return &weightedRR{} }

type weightedRR struct {
	snap atomic.Pointer[wrrSnapshot]
}

type wrrSnapshot struct {
	keys    []string
	weights []int64
	mu      sync.Mutex     // serializes picks on cur
	cur     []atomic.Int64 // current weights; written only under mu
}

func (s *weightedRR) Update(servers []registry.Instance) {
	n := &wrrSnapshot{}
	for i := range servers {
		if usable(&servers[i]) {
			n.keys = append(n.keys, servers[i].Key())
			n.weights = append(n.weights, int64(servers[i].EffectiveWeight()))
		}
	}
	n.cur = make([]atomic.Int64, len(n.keys))
	if old := s.snap.Load(); old != nil && len(old.keys) > 0 && len(n.keys) > 0 {
		at := make(map[string]int, len(old.keys))
		for i, k := range old.keys {
			at[k] = i
		}
		for i, k := range n.keys {
			if j, ok := at[k]; ok {
				n.cur[i].Store(old.cur[j].Load())
			}
		}
	}
	s.snap.Store(n)
}

func (s *weightedRR) Select(p *Pick) string {
	sn := s.snap.Load()
	if sn == nil || len(sn.keys) == 0 {
		return ""
	}
	n := len(sn.keys)
	ex := excludeOf(p)
	var out bitset
	callUnderLock := false
	if ex != nil {
		all := true
		for i := 0; i < n && i < bitsetSize; i++ {
			if ex(sn.keys[i]) {
				out.set(i)
			} else {
				all = false
			}
		}
		if n > bitsetSize {
			callUnderLock, all = true, false
		}
		if all {
			return ""
		}
	}

	best, bestCur, total := -1, int64(0), int64(0)
	sn.mu.Lock()
	for i := 0; i < n; i++ {
		if ex != nil {
			if i < bitsetSize {
				if out.has(i) {
					continue
				}
			} else if callUnderLock && ex(sn.keys[i]) {
				continue
			}
		}
		w := sn.weights[i]
		c := sn.cur[i].Load() + w
		sn.cur[i].Store(c)
		total += w
		if best < 0 || c > bestCur {
			best, bestCur = i, c
		}
	}
	if best >= 0 {
		sn.cur[best].Store(bestCur - total)
	}
	sn.mu.Unlock()
	if best < 0 {
		return ""
	}
	return sn.keys[best]
}
