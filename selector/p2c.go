package selector

import (
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetrpc/fleet/registry"
)

// NewP2C returns a latency-aware Selector: "power of two choices" over a
// peak-EWMA cost. Each Select draws two distinct servers at random and
// returns the one with the lower cost
//
//	cost = latency estimate × (calls in flight from this client + 1)
//
// choosing between the two at random on a tie. Looking at two random
// servers rather than one exponentially shortens the longest queue
// (Mitzenmacher, "The Power of Two Choices in Randomized Load Balancing",
// IEEE TPDS 12(10), 2001) while costing O(1) per pick; the cost function is
// that of Finagle's PeakEwma balancer and linkerd's (tower's) peak_ewma.
//
// The returned Selector implements Observer, and learns only through it:
// Begin and End count calls in flight, and End feeds the call's latency
// into the server's estimate, an exponentially weighted moving average
// whose weights decay with time, with time constant cfg.Decay (default 10
// s): a sample arriving Δ after the previous one has weight 1-exp(-Δ/τ).
// A successful call slower than the current estimate replaces it outright
// (the "peak": a server that turns slow is avoided at once), and the
// estimate decays towards zero while a server gets no samples, so a server
// once slow is tried again. A failed call (err != nil) counts as a sample
// of max(latency, cfg.ErrorPenalty) (default 1 s) without the peak rule, so
// an error rate r adds about r × ErrorPenalty to a server's estimate. The
// client should report to End only errors that reflect on the server;
// application errors it may report as nil.
//
// A server with no sample yet is given a neutral estimate, that of the
// other candidate (or equal estimates when neither has a sample), so the
// choice falls to the in-flight counts and new servers get traffic at once.
// Estimates and counts are kept across Updates for servers that stay.
//
// Select reads atomics and the monotonic clock; it allocates nothing and
// never blocks. End serializes updates to one server's estimate with that
// server's own mutex.
func NewP2C(cfg P2CConfig) Selector {
	return &p2c{
		tau:     float64(cfg.decay()),
		penalty: float64(cfg.errorPenalty()),
	}
}

type p2c struct {
	tau, penalty float64 // nanoseconds
	snap         atomic.Pointer[p2cSnapshot]
}

type p2cSnapshot struct {
	keys    []string
	servers []*p2cServer
	byKey   map[string]*p2cServer
}

type p2cServer struct {
	inflight counter
	mu       sync.Mutex    // serializes End's read-modify-write of ewma
	ewma     atomic.Uint64 // math.Float64bits of the estimate, in ns
	stamp    atomic.Int64  // nanotime of the last sample; 0 before the first
}

// cost returns the server's latency estimate decayed to now, and whether it
// has one.
func (sv *p2cServer) cost(now int64, tau float64) (float64, bool) {
	st := sv.stamp.Load()
	if st == 0 {
		return 0, false
	}
	e := math.Float64frombits(sv.ewma.Load())
	if d := now - st; d > 0 {
		e *= math.Exp(-float64(d) / tau)
	}
	return e, true
}

func (s *p2c) Update(servers []registry.Instance) {
	var old map[string]*p2cServer
	if o := s.snap.Load(); o != nil {
		old = o.byKey
	}
	n := &p2cSnapshot{}
	n.byKey = carryOver(servers, old, func(_ *registry.Instance, k string, sv *p2cServer) {
		n.keys = append(n.keys, k)
		n.servers = append(n.servers, sv)
	})
	s.snap.Store(n)
}

func (s *p2c) Select(p *Pick) string {
	sn := s.snap.Load()
	if sn == nil || len(sn.keys) == 0 {
		return ""
	}
	ex := excludeOf(p)
	n := len(sn.keys)
	if n == 1 {
		if ex != nil && ex(sn.keys[0]) {
			return ""
		}
		return sn.keys[0]
	}
	a := rand.N(n)
	b := rand.N(n - 1)
	if b >= a {
		b++
	}
	if ex != nil && (ex(sn.keys[a]) || ex(sn.keys[b])) {
		// Draw two distinct servers among those not excluded (reservoir
		// sampling of size two).
		a, b = -1, -1
		seen := 0
		for i, k := range sn.keys {
			if ex(k) {
				continue
			}
			seen++
			switch seen {
			case 1:
				a = i
			case 2:
				b = i
			default:
				switch rand.N(seen) {
				case 0:
					a = i
				case 1:
					b = i
				}
			}
		}
		if a < 0 {
			return ""
		}
		if b < 0 {
			return sn.keys[a]
		}
	}

	now := nanotime()
	sa, sb := sn.servers[a], sn.servers[b]
	ea, oka := sa.cost(now, s.tau)
	eb, okb := sb.cost(now, s.tau)
	switch {
	case !oka && !okb:
		ea, eb = 1, 1
	case !oka:
		ea = eb
	case !okb:
		eb = ea
	}
	// A floor of 1 ns keeps in-flight counts meaningful for estimates that
	// decayed to (or were reported as) zero.
	ca := max(ea, 1) * float64(sa.inflight.load()+1)
	cb := max(eb, 1) * float64(sb.inflight.load()+1)
	switch {
	case ca < cb:
		return sn.keys[a]
	case cb < ca:
		return sn.keys[b]
	case rand.N(2) == 0:
		return sn.keys[a]
	default:
		return sn.keys[b]
	}
}

// Begin counts a call sent to key. Unknown keys are ignored.
func (s *p2c) Begin(key string) {
	if sn := s.snap.Load(); sn != nil {
		if sv := sn.byKey[key]; sv != nil {
			sv.inflight.begin()
		}
	}
}

// End counts a call to key completed and feeds its latency (or the error
// penalty) into key's estimate. Unknown keys are ignored.
func (s *p2c) End(key string, latency time.Duration, err error) {
	sn := s.snap.Load()
	if sn == nil {
		return
	}
	sv := sn.byKey[key]
	if sv == nil {
		return
	}
	sv.inflight.end()
	rtt := float64(max(latency, 0))
	if err != nil {
		rtt = max(rtt, s.penalty)
	}
	sv.mu.Lock()
	defer sv.mu.Unlock()
	now := nanotime()
	e := rtt
	if st := sv.stamp.Load(); st != 0 {
		w := 1.0
		if d := now - st; d > 0 {
			w = math.Exp(-float64(d) / s.tau)
		}
		decayed := math.Float64frombits(sv.ewma.Load()) * w
		if err != nil || rtt <= decayed {
			e = decayed + rtt*(1-w)
		}
	}
	sv.ewma.Store(math.Float64bits(e))
	sv.stamp.Store(now)
}
