package server

// AdmissionStat is the state of one admission stage of a server (see
// AdmissionStats). Its fields are read at one moment each, not as one
// snapshot: a count may move between two of them.
type AdmissionStat struct {
	// Stage names the stage: one of the Stage constants.
	Stage string
	// Service and Method name the method of a per-method stage
	// (StageMethodRate, StageMethodConcurrency), as the limit was set;
	// empty for the others.
	Service, Method string
	// Limit is the stage's bound, in the stage's unit (see the Stage
	// constants); 0: none.
	Limit float64
	// InUse is what the stage counts against Limit now, in the same
	// unit: for a rate limit, the tokens missing from its full bucket
	// (rounded up).
	InUse int64
	// Refused counts what the stage refused since the server was made:
	// connections for the connection caps, calls for the others (for
	// StageMemory, the calls Invoke refused because their decoded bytes
	// did not fit; a native connection waits for room instead).
	Refused uint64
	// Waiting is what waits for the stage now: oneway sends waiting for a
	// slot, calls in the adaptive limit's backlog, reservations of the
	// memory budget.
	Waiting int64
}

// The admission stages, in the order a call passes them (pipeline.go),
// with the unit of their Limit and InUse.
const (
	StageConns             = "conns"              // connections open at once (WithMaxConns)
	StageConnsPerIP        = "conns-per-ip"       // connections from one IP; InUse: the most from one IP (WithMaxConnsPerIP)
	StageRate              = "rate"               // calls per second; InUse: tokens (WithRateLimit)
	StageMethodRate        = "method-rate"        // calls per second of one method; InUse: tokens (SetMethodLimits)
	StageMethodConcurrency = "method-concurrency" // calls of one method running at once (SetMethodLimits)
	StageConnConcurrency   = "conn-concurrency"   // calls running on one native connection; InUse: the most on one (WithMaxConcurrentPerConn)
	StageAdaptive          = "adaptive"           // calls running under the adaptive limit (WithAdaptiveLimit)
	StageMemory            = "memory"             // request bytes held, all connections (WithMaxPendingBytes)
)

// admissionStage is one admission limiter as the server reports it. The
// calls' admission uses each limiter's own concrete methods (no interface
// call on the hot path); this shape is for reading their state.
type admissionStage interface {
	// Stats appends the stage's state (one entry, or one per method for
	// the per-method stages) to dst and returns it.
	Stats(dst []AdmissionStat) []AdmissionStat
}

// admissionStages returns the server's configured stages in pipeline
// order; built once by New.
func (s *Server) admissionStages() []admissionStage {
	var st []admissionStage
	if s.opts.maxConns > 0 || s.opts.maxConnsPerIP > 0 {
		st = append(st, connsStage{s})
	}
	if s.rate != nil {
		st = append(st, s.rate)
	}
	st = append(st, methodStage{s})
	if s.opts.maxPerConn > 0 {
		st = append(st, connCapStage{s})
	}
	if s.adaptive != nil {
		st = append(st, s.adaptive)
	}
	if s.mem.max > 0 {
		st = append(st, &s.mem)
	}
	return st
}

// AdmissionStats returns the state of each admission stage the server has,
// in the order a call passes them: StageConns and StageConnsPerIP (when
// capped), StageRate (WithRateLimit), StageMethodRate and
// StageMethodConcurrency (one per method with such a limit, sorted by
// service then method), StageConnConcurrency (WithMaxConcurrentPerConn,
// on by default), StageAdaptive (WithAdaptiveLimit), StageMemory
// (WithMaxPendingBytes, on by default). A stage that is off is left out.
// Safe for concurrent use; it allocates the returned slice and takes the
// stages' locks briefly (do not call it per request).
func (s *Server) AdmissionStats() []AdmissionStat {
	out := make([]AdmissionStat, 0, len(s.stages)+2)
	for _, st := range s.stages {
		out = st.Stats(out)
	}
	return out
}

// connsStage reports the connection caps.
type connsStage struct{ s *Server }

// Stats appends StageConns and StageConnsPerIP, those capped.
func (st connsStage) Stats(dst []AdmissionStat) []AdmissionStat {
	a := &st.s.admitted
	a.mu.Lock()
	open, most := a.open, 0
	for _, n := range a.perIP {
		most = max(most, n)
	}
	a.mu.Unlock()
	if n := st.s.opts.maxConns; n > 0 {
		dst = append(dst, AdmissionStat{Stage: StageConns, Limit: float64(n), InUse: int64(open), Refused: a.refused.Load()})
	}
	if n := st.s.opts.maxConnsPerIP; n > 0 {
		dst = append(dst, AdmissionStat{Stage: StageConnsPerIP, Limit: float64(n), InUse: int64(most), Refused: a.refusedIP.Load()})
	}
	return dst
}

// connCapStage reports the per-connection concurrency cap.
type connCapStage struct{ s *Server }

// Stats appends StageConnConcurrency.
func (st connCapStage) Stats(dst []AdmissionStat) []AdmissionStat {
	s := st.s
	var most int64
	s.mu.Lock()
	for c := range s.conns {
		most = max(most, c.active.Load())
	}
	s.mu.Unlock()
	return append(dst, AdmissionStat{
		Stage: StageConnConcurrency, Limit: float64(s.opts.maxPerConn), InUse: most,
		Refused: s.connCapRefused.Load(), Waiting: s.connCapWaiting.Load(),
	})
}

// Stats appends StageAdaptive.
func (l *adaptiveLimiter) Stats(dst []AdmissionStat) []AdmissionStat {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append(dst, AdmissionStat{
		Stage: StageAdaptive, Limit: float64(l.capLocked()), InUse: int64(l.inflight),
		Refused: l.shed, Waiting: int64(len(l.backlog) + l.waiters),
	})
}

// Stats appends StageMemory.
func (b *memBudget) Stats(dst []AdmissionStat) []AdmissionStat {
	return append(dst, AdmissionStat{
		Stage: StageMemory, Limit: float64(b.max), InUse: b.used.Load(),
		Refused: b.refused.Load(), Waiting: b.waiters.Load(),
	})
}
