package server

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/time/rate"
)

// MethodLimits are the admission limits of one method (SetMethodLimits).
// The zero value sets no limit.
type MethodLimits struct {
	// Rate is the calls of the method admitted per second on average, all
	// routes and connections together, with bursts of up to Burst (a
	// token bucket, golang.org/x/time/rate). A call over it is answered
	// ResourceExhausted without running, with the retry-after metadata
	// (RetryAfterKey); a oneway send waits for a token instead. 0 or
	// less: no rate limit.
	Rate float64
	// Burst is the bucket's size: the calls admitted at once after a
	// quiet spell. Default (0 or less): 1 when Rate is set.
	Burst int
	// MaxConcurrent caps the calls of the method running at once, all
	// routes and connections together (streams count from their open to
	// their end). A call over the cap is answered ResourceExhausted
	// without running, with the retry-after metadata set to 1 ms; a
	// oneway send waits for a slot instead (its connection is not read
	// meanwhile). 0 or less: no cap.
	MaxConcurrent int
}

// SetMethodLimits replaces the limits of service.method (named as callers
// name it: for gRPC callers, the service name with its protobuf package)
// with l; a zero l removes them. The method need not be registered yet.
// The change applies, as a whole, to the calls admitted after
// SetMethodLimits returns: calls already admitted keep running, and count
// against a changed concurrency cap when they were admitted under a cap
// (calls admitted while the method had no cap are not counted). A changed
// Rate or Burst starts a new, full bucket; an unchanged one keeps its
// tokens. WithMethodRateLimit sets the same limits at New. Safe for
// concurrent use with calls and with itself; the calls' admission reads
// an immutable table (rebuilt here on each change) with one atomic load.
// To change several methods at once, use SetServiceLimits.
func (s *Server) SetMethodLimits(service, method string, l MethodLimits) {
	s.methodMu.Lock()
	defer s.methodMu.Unlock()
	s.setMethodLimitsLocked([]methodLimit{{rateKey{service, method}, l}})
}

// SetServiceLimits sets the limits of several methods of service in one
// step: each method limits names gets its MethodLimits (a zero one
// removes that method's limits), as SetMethodLimits would set it; the
// methods limits does not name keep theirs. Every change lands in one
// swap of the table admission reads, so no call sees some of them and
// not the others: a call admitted after SetServiceLimits returns sees all
// of them, one admitted before sees none. An empty or nil limits changes
// nothing. Safe for concurrent use with calls and with the other setters.
// policy.ApplyLimits (module github.com/fleetrpc/fleet/policy) applies a
// policy document's limits through it.
func (s *Server) SetServiceLimits(service string, limits map[string]MethodLimits) {
	if len(limits) == 0 {
		return
	}
	changes := make([]methodLimit, 0, len(limits))
	for m, l := range limits {
		changes = append(changes, methodLimit{rateKey{service, m}, l})
	}
	s.methodMu.Lock()
	defer s.methodMu.Unlock()
	s.setMethodLimitsLocked(changes)
}

// MethodLimitsOf returns the limits set on service.method with
// SetMethodLimits, SetServiceLimits or WithMethodRateLimit (Burst with
// its default applied), and false when it has none. Safe for concurrent
// use.
func (s *Server) MethodLimitsOf(service, method string) (MethodLimits, bool) {
	t := s.methodLimits.Load()
	if t == nil {
		return MethodLimits{}, false
	}
	e := t.byName[service][method]
	if e == nil {
		return MethodLimits{}, false
	}
	return e.lim, true
}

// setMethodLimitsLocked applies changes (a zero MethodLimits removes a
// method's limits; a later change of the same method wins) to a copy of
// the table and stores it with one atomic swap. methodMu is held.
func (s *Server) setMethodLimitsLocked(changes []methodLimit) {
	old := s.methodLimits.Load()
	next := &methodTable{byName: make(map[string]map[string]*methodEntry)}
	if old != nil {
		for svc, ms := range old.byName {
			cp := make(map[string]*methodEntry, len(ms))
			for m, e := range ms {
				cp[m] = e
			}
			next.byName[svc] = cp
		}
	}
	var woken []*methodCounter
	for _, c := range changes {
		k, l := c.key, c.MethodLimits
		if l.Rate <= 0 {
			l.Rate, l.Burst = 0, 0
		} else if l.Burst <= 0 {
			l.Burst = 1
		}
		l.MaxConcurrent = max(l.MaxConcurrent, 0)
		prev := next.byName[k.service][k.method]
		if prev != nil {
			woken = append(woken, prev.ctr)
		}
		if l == (MethodLimits{}) {
			delete(next.byName[k.service], k.method)
			if len(next.byName[k.service]) == 0 {
				delete(next.byName, k.service)
			}
			continue
		}
		if s.methodCtrs == nil {
			s.methodCtrs = make(map[rateKey]*methodCounter)
		}
		ctr := s.methodCtrs[k]
		if ctr == nil {
			ctr = &methodCounter{key: k}
			s.methodCtrs[k] = ctr
		}
		e := &methodEntry{lim: l, max: int64(l.MaxConcurrent), ctr: ctr}
		if l.Rate > 0 {
			if prev != nil && prev.rate != nil && prev.lim.Rate == l.Rate && prev.lim.Burst == l.Burst {
				e.rate = prev.rate
			} else {
				e.rate = rate.NewLimiter(rate.Limit(l.Rate), l.Burst)
			}
		}
		if next.byName[k.service] == nil {
			next.byName[k.service] = make(map[string]*methodEntry)
		}
		next.byName[k.service][k.method] = e
	}
	if len(next.byName) == 0 {
		next = nil
	}
	s.methodLimits.Store(next)
	// Waiting oneway sends look at the new caps (waitMethodSlot).
	for _, ctr := range woken {
		ctr.wakeAll()
	}
}

// methodTable is the immutable table of per-method limits, keyed by
// service, then method, so that a call is looked up by the bytes of its
// frame without making strings. Replaced whole on each change.
type methodTable struct {
	byName map[string]map[string]*methodEntry
}

// get returns the limits of service.method, or nil. It does not allocate.
func (t *methodTable) get(service, method []byte) *methodEntry {
	return t.byName[string(service)][string(method)]
}

// methodEntry is one method's limits, immutable once in a table.
type methodEntry struct {
	lim  MethodLimits
	rate *rate.Limiter // nil: no rate limit
	max  int64         // <= 0: no cap
	ctr  *methodCounter
}

// methodCounter counts one method's calls under its concurrency cap and
// the calls its limits refused. It outlives table changes (one per method
// ever limited), so that a call admitted before a change leaves the count
// it entered. Safe for concurrent use.
type methodCounter struct {
	key         rateKey
	inflight    atomic.Int64
	rateRefused atomic.Uint64
	capRefused  atomic.Uint64
	waiters     atomic.Int64
	mu          sync.Mutex
	wake        chan struct{} // closed (and cleared) when a slot frees while waiters > 0
}

// tryEnter takes a slot when fewer than max calls hold one.
func (m *methodCounter) tryEnter(max int64) bool {
	for {
		n := m.inflight.Load()
		if n >= max {
			return false
		}
		if m.inflight.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// waitMethodSlot waits until service.method, whose counter is ctr, has
// a slot free under its cap, read again from the current table at each
// wake-up (SetMethodLimits wakes the waiters), and takes it; slot is nil
// when the cap was removed meanwhile. It reports false when done ends
// first.
func (s *Server) waitMethodSlot(service, method []byte, ctr *methodCounter, done context.Context) (slot *methodCounter, ok bool) {
	ctr.waiters.Add(1)
	defer ctr.waiters.Add(-1)
	for {
		var e *methodEntry
		if t := s.methodLimits.Load(); t != nil {
			e = t.get(service, method)
		}
		if e == nil || e.max <= 0 {
			return nil, true
		}
		if e.ctr.tryEnter(e.max) {
			return e.ctr, true
		}
		ctr.mu.Lock()
		if ctr.wake == nil {
			ctr.wake = make(chan struct{})
		}
		ch := ctr.wake
		ctr.mu.Unlock()
		// Re-check after taking the channel: a leave or a change before
		// it was made is seen here, one after it closes ch.
		if t := s.methodLimits.Load(); t == nil || t.get(service, method) != e {
			continue
		}
		if e.ctr.tryEnter(e.max) {
			return e.ctr, true
		}
		select {
		case <-ch:
		case <-done.Done():
			return nil, false
		}
	}
}

// leave gives back a slot taken by tryEnter or waitMethodSlot. A nil
// *methodCounter holds none.
func (m *methodCounter) leave() {
	if m == nil {
		return
	}
	m.inflight.Add(-1)
	if m.waiters.Load() > 0 {
		m.wakeAll()
	}
}

// wakeAll wakes the waiting oneway sends, which look at the cap again.
func (m *methodCounter) wakeAll() {
	m.mu.Lock()
	if m.wake != nil {
		close(m.wake)
		m.wake = nil
	}
	m.mu.Unlock()
}

// methodStage reports the per-method limits (StageMethodRate,
// StageMethodConcurrency), sorted by service then method.
type methodStage struct{ s *Server }

// Stats appends one AdmissionStat per limit set on a method.
func (st methodStage) Stats(dst []AdmissionStat) []AdmissionStat {
	t := st.s.methodLimits.Load()
	if t == nil {
		return dst
	}
	var es []*methodEntry
	for _, ms := range t.byName {
		for _, e := range ms {
			es = append(es, e)
		}
	}
	slices.SortFunc(es, func(a, b *methodEntry) int {
		return cmp.Or(strings.Compare(a.ctr.key.service, b.ctr.key.service), strings.Compare(a.ctr.key.method, b.ctr.key.method))
	})
	for _, e := range es {
		k := e.ctr.key
		if e.rate != nil {
			dst = append(dst, rateStat(StageMethodRate, k.service, k.method, e.rate, e.ctr.rateRefused.Load()))
		}
		if e.max > 0 {
			dst = append(dst, AdmissionStat{
				Stage: StageMethodConcurrency, Service: k.service, Method: k.method,
				Limit: float64(e.max), InUse: e.ctr.inflight.Load(),
				Refused: e.ctr.capRefused.Load(), Waiting: e.ctr.waiters.Load(),
			})
		}
	}
	return dst
}
