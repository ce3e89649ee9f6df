package policy

import (
	"log/slog"

	"github.com/fleetrpc/fleet/server"
)

// Limits is a method's admission limits on a server, the same fields as
// server.MethodLimits, in the same order, so that one converts to the
// other: Rate calls per second sustained (0: unlimited), Burst the token
// bucket's depth (0: 1 when Rate is set), MaxConcurrent the calls running
// at once (0: unlimited). The zero Limits removes every limit.
type Limits struct {
	Rate          float64
	Burst         int
	MaxConcurrent int
}

// LimitSetter sets a service's per-method limits on a server in one
// step: each method limits names gets its Limits (the zero Limits removes
// that method's), the methods it does not name keep theirs, and no call
// sees some of the changes without the others. An error means none was
// made. (*server.Server).SetServiceLimits is one, adapted by
// ServerLimits.
type LimitSetter interface {
	SetServiceLimits(service string, limits map[string]Limits) error
}

// LimitSetterFunc adapts a function to a LimitSetter.
type LimitSetterFunc func(service string, limits map[string]Limits) error

// SetServiceLimits calls f.
func (f LimitSetterFunc) SetServiceLimits(service string, limits map[string]Limits) error {
	return f(service, limits)
}

// ServerLimits returns the LimitSetter of srv: its SetServiceLimits,
// which swaps the server's whole limits table at once.
func ServerLimits(srv *server.Server) LimitSetter {
	return LimitSetterFunc(func(service string, limits map[string]Limits) error {
		m := make(map[string]server.MethodLimits, len(limits))
		for k, l := range limits {
			m[k] = server.MethodLimits(l)
		}
		srv.SetServiceLimits(service, m)
		return nil
	})
}

// ApplyLimits keeps the per-method limits of w's policy set on s: now, and
// after each change, in one SetServiceLimits call per change, so that a
// call sees the limits of one document entirely, never one method's new
// limits with another's old ones. The methods the new policy names get
// its limits; the methods the previous policy named and the new one does
// not get the zero Limits (no limit); the methods neither names keep
// what the server has (its code defaults). A refused document changes
// nothing (the Watcher does not apply it). An error of s is logged (to
// logger, or slog.Default() when nil); as s made none of the changes,
// the next change is applied against the limits s still has. It returns
// a function that stops following w.
func ApplyLimits(w *Watcher, s LimitSetter, logger *slog.Logger) (stop func()) {
	if logger == nil {
		logger = slog.Default()
	}
	var prev map[string]MethodLimit
	return w.OnChange(func(p *Policy) {
		var next map[string]MethodLimit
		if p != nil {
			next = p.Limits()
		}
		changes := map[string]Limits{}
		for m, l := range next {
			if old, ok := prev[m]; ok && old == l {
				continue
			}
			changes[m] = Limits{Rate: l.Rate, Burst: l.Burst, MaxConcurrent: l.MaxConcurrent}
		}
		for m := range prev {
			if _, ok := next[m]; !ok {
				changes[m] = Limits{}
			}
		}
		if len(changes) == 0 {
			prev = next
			return
		}
		if err := s.SetServiceLimits(w.service, changes); err != nil {
			logger.Warn("policy: setting method limits", "service", w.service, "error", err)
			return
		}
		prev = next
	})
}
