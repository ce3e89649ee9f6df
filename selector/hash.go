package selector

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
	"github.com/fleetrpc/fleet/registry"
)

// NewConsistentHash returns a Selector that maps Pick.Key onto a hash ring
// (Karger et al., "Consistent Hashing and Random Trees", STOC 1997, with
// the virtual nodes of libketama): each server owns cfg.VirtualNodes points
// (default 160; times its EffectiveWeight when cfg.WeightedNodes is set,
// at most 65,536 points per server), and a key goes to the owner of the
// first point at or after the key's hash, wrapping around. When a server
// joins it takes about 1/n of the keys, all from the others; when one
// leaves only its keys move. If the owner is excluded the walk continues
// clockwise to the next server that is not.
//
// Hashes are 64-bit xxHash (github.com/cespare/xxhash/v2) with no seed, so
// they are the same in every process and every run: a server's points are
// the hashes of "<Key>#<i>" for i = 0..points-1, and the ring does not
// depend on the order of the servers Update receives. A Pick with an empty
// Key gets a uniformly random server.
//
// Update sorts the ring once; Select hashes the key and binary-searches the
// ring, in O(log(n × VirtualNodes)), allocating nothing and never blocking.
func NewConsistentHash(cfg HashConfig) Selector {
	return &consistentHash{points: cfg.virtualNodes(), weighted: cfg.WeightedNodes}
}

// maxPointsPerServer bounds the ring when weights are large.
const maxPointsPerServer = 1 << 16

type consistentHash struct {
	points   int
	weighted bool
	snap     atomic.Pointer[ringSnapshot]
}

type ringSnapshot struct {
	keys   []string // servers, sorted
	hashes []uint64 // ring points, ascending
	owner  []int32  // owner[i] indexes keys: the server of hashes[i]
}

func (s *consistentHash) Update(servers []registry.Instance) {
	type server struct {
		key    string
		points int
	}
	list := make([]server, 0, len(servers))
	total := 0
	for i := range servers {
		in := &servers[i]
		if !usable(in) {
			continue
		}
		pts := s.points
		if w := in.EffectiveWeight(); s.weighted && w > 1 {
			if w > maxPointsPerServer/pts {
				pts = maxPointsPerServer // and pts*w might overflow
			} else {
				pts = min(pts*w, maxPointsPerServer)
			}
		}
		list = append(list, server{in.Key(), pts})
		total += pts
	}
	slices.SortFunc(list, func(a, b server) int { return cmp.Compare(a.key, b.key) })
	list = slices.CompactFunc(list, func(a, b server) bool { return a.key == b.key })

	type point struct {
		hash  uint64
		owner int32
	}
	ring := make([]point, 0, total)
	sn := &ringSnapshot{keys: make([]string, len(list))}
	var buf []byte
	for i, sv := range list {
		sn.keys[i] = sv.key
		for j := 0; j < sv.points; j++ {
			buf = append(buf[:0], sv.key...)
			buf = append(buf, '#')
			buf = strconv.AppendInt(buf, int64(j), 10)
			ring = append(ring, point{xxhash.Sum64(buf), int32(i)})
		}
	}
	// Ties between servers' points (rare) go to the smaller key, the same
	// in every process.
	slices.SortFunc(ring, func(a, b point) int {
		if c := cmp.Compare(a.hash, b.hash); c != 0 {
			return c
		}
		return cmp.Compare(a.owner, b.owner)
	})
	sn.hashes = make([]uint64, len(ring))
	sn.owner = make([]int32, len(ring))
	for i, pt := range ring {
		sn.hashes[i], sn.owner[i] = pt.hash, pt.owner
	}
	s.snap.Store(sn)
}

func (s *consistentHash) Select(p *Pick) string {
	sn := s.snap.Load()
	if sn == nil || len(sn.keys) == 0 {
		return ""
	}
	ex := excludeOf(p)
	if p == nil || p.Key == "" {
		if ex == nil {
			return sn.keys[rand.N(len(sn.keys))]
		}
		return pickOne(sn.keys, ex)
	}
	h := xxhash.Sum64String(p.Key)
	// The first point with hash >= h, or len when none (wrap to 0).
	lo, hi := 0, len(sn.hashes)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if sn.hashes[m] < h {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == len(sn.hashes) {
		lo = 0
	}
	k := sn.keys[sn.owner[lo]]
	if ex == nil || !ex(k) {
		return k
	}
	// Walk clockwise, asking Exclude about each server once (for the first
	// 1024 servers) and stopping when all have been refused.
	var out bitset
	refused := 0
	n := len(sn.hashes)
	for step := 0; step < n; step++ {
		i := lo + step
		if i >= n {
			i -= n
		}
		o := int(sn.owner[i])
		if o < bitsetSize && out.has(o) {
			continue
		}
		k := sn.keys[o]
		if !ex(k) {
			return k
		}
		if o < bitsetSize {
			out.set(o)
			if refused++; refused == len(sn.keys) {
				return ""
			}
		}
	}
	return ""
}
