package policy

import (
	"errors"
	"log/slog"
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

// LimitSetter sets one method's limits on a server. (*server.Server)'s
// SetMethodLimits(service, method, server.MethodLimits) is adapted to it
// by a LimitSetterFunc (Limits converts to server.MethodLimits, whose
// fields it mirrors):
//
//	policy.LimitSetterFunc(func(svc, m string, l policy.Limits) error {
//		srv.SetMethodLimits(svc, m, server.MethodLimits(l))
//		return nil
//	})
type LimitSetter interface {
	SetMethodLimits(service, method string, l Limits) error
}

// LimitSetterFunc adapts a function to a LimitSetter.
type LimitSetterFunc func(service, method string, l Limits) error

// SetMethodLimits calls f.
func (f LimitSetterFunc) SetMethodLimits(service, method string, l Limits) error {
	return f(service, method, l)
}

// ApplyLimits keeps the per-method limits of w's policy set on s: now, and
// after each change the methods the new policy names get its limits, and
// the methods the previous policy named but the new one does not get the
// zero Limits (no limit). Methods are set one by one: between two of them
// a call may see the old limits of one and the new of another. Errors of
// s are logged (to logger, or slog.Default() when nil) and do not stop
// the others. It returns a function that stops following w.
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
		var errs []error
		for m, l := range next {
			if old, ok := prev[m]; ok && old == l {
				continue
			}
			errs = append(errs, s.SetMethodLimits(w.service, m, Limits{Rate: l.Rate, Burst: l.Burst, MaxConcurrent: l.MaxConcurrent}))
		}
		for m := range prev {
			if _, ok := next[m]; !ok {
				errs = append(errs, s.SetMethodLimits(w.service, m, Limits{}))
			}
		}
		if err := errors.Join(errs...); err != nil {
			logger.Warn("policy: setting method limits", "service", w.service, "error", err)
		}
		prev = next
	})
}
