package server

import (
	"testing"
	"time"
)

// feed applies n samples of latency rtt, each with the limit's worth of
// calls in flight, and returns the limit after each.
func feed(l *adaptiveLimiter, n int, rtt time.Duration, inflight func(limit float64) int, dropped bool) []float64 {
	out := make([]float64, 0, n)
	for i := 0; i < n; i++ {
		l.update(rtt, inflight(l.limit), dropped)
		out = append(out, l.limit)
	}
	return out
}

func full(limit float64) int { return int(limit) }

// algorithms are the limit's adaptation rules the behaviour tests below
// run under.
var algorithms = []AdaptiveAlgorithm{AdaptiveGradient, AdaptiveVegas}

func TestAdaptiveLimitGrowsWithoutQueueing(t *testing.T) {
	for _, alg := range algorithms {
		l := newAdaptiveLimiter(AdaptiveLimit{Algorithm: alg, Initial: 20})
		got := feed(l, 100, 10*time.Millisecond, full, false)
		for i := 1; i < len(got); i++ {
			if got[i] < got[i-1] {
				t.Fatalf("%v: limit fell from %v to %v at sample %d with constant latency", alg, got[i-1], got[i], i)
			}
		}
		if got[len(got)-1] <= 20 {
			t.Fatalf("%v: limit = %v after 100 unqueued samples, want above the initial 20", alg, got[len(got)-1])
		}
		if got[len(got)-1] > DefaultAdaptiveMax {
			t.Fatalf("%v: limit = %v, over the default max", alg, got[len(got)-1])
		}
	}
}

func TestAdaptiveLimitShrinksWhenLatencyRises(t *testing.T) {
	for _, alg := range algorithms {
		l := newAdaptiveLimiter(AdaptiveLimit{Algorithm: alg, Initial: 100, Min: 5})
		l.update(10*time.Millisecond, 100, false) // the no-load baseline
		got := feed(l, 200, 40*time.Millisecond, full, false)
		if got[0] >= 100 {
			t.Fatalf("%v: limit = %v after a queued sample, want below 100", alg, got[0])
		}
		for i := 1; i < len(got); i++ {
			if got[i] > got[i-1] {
				t.Fatalf("%v: limit rose from %v to %v at sample %d with latency 4x the baseline", alg, got[i-1], got[i], i)
			}
		}
		// Vegas settles where the estimated queue is within 6 log10(limit),
		// the gradient at 2 × QueueSize (gradient 0.5): far below where it
		// started, never below Min.
		if last := got[len(got)-1]; last >= 20 || last < 5 {
			t.Fatalf("%v: limit = %v after 200 queued samples, want in [5, 20)", alg, last)
		}
	}
}

func TestAdaptiveLimitDropShrinks(t *testing.T) {
	for _, alg := range algorithms {
		l := newAdaptiveLimiter(AdaptiveLimit{Algorithm: alg, Initial: 50})
		l.update(10*time.Millisecond, 50, false)
		l.update(10*time.Millisecond, 50, true)
		if l.limit >= 50 {
			t.Fatalf("%v: limit = %v after a dropped call, want below 50", alg, l.limit)
		}
	}
}

func TestAdaptiveLimitAppLimitedHolds(t *testing.T) {
	for _, alg := range algorithms {
		l := newAdaptiveLimiter(AdaptiveLimit{Algorithm: alg, Initial: 50})
		got := feed(l, 50, 10*time.Millisecond, func(float64) int { return 3 }, false)
		for _, v := range got {
			if v != 50 {
				t.Fatalf("%v: limit moved to %v with 3 of 50 in flight", alg, v)
			}
		}
	}
}

// TestAdaptiveLimitProbeResetsBaseline: the no-load latency is the minimum
// of the current and the previous period of ProbeMultiplier × limit
// samples (4 here): a lasting rise is learnt once a whole period has passed
// after the one holding the old minimum, and not before.
func TestAdaptiveLimitProbeResetsBaseline(t *testing.T) {
	l := newAdaptiveLimiter(AdaptiveLimit{Initial: 4, Min: 4, Max: 4, ProbeMultiplier: 1})
	l.update(10*time.Millisecond, 4, false)
	// Samples 2-4 end the first period, 5-8 the second.
	for i := 2; i <= 7; i++ {
		l.update(50*time.Millisecond, 4, false)
		if got := l.noLoad.get(); got != 10*time.Millisecond {
			t.Fatalf("no-load latency = %v at sample %d, within a period of the 10ms one; want 10ms", got, i)
		}
	}
	l.update(50*time.Millisecond, 4, false)
	if got := l.noLoad.get(); got != 50*time.Millisecond {
		t.Fatalf("no-load latency = %v after a whole period of 50ms, want the new 50ms", got)
	}
	if l.probe != 0 {
		t.Fatalf("a probe started (%d samples) though no call was shed", l.probe)
	}
}

// TestAdaptiveLimitProbeDrains: at the end of a period in which a call was
// shed and none finished with at most Min in flight, a probe starts: the
// limit is held and at most Min calls are admitted until the calls in
// flight and Min more have completed; then the limit admits again.
func TestAdaptiveLimitProbeDrains(t *testing.T) {
	const limit, minLimit = 10, 3
	l := newAdaptiveLimiter(AdaptiveLimit{Initial: limit, Min: minLimit, Max: limit, ProbeMultiplier: 1})
	for range limit {
		if !l.tryAcquire() {
			t.Fatal("could not fill the limit")
		}
	}
	if l.tryAcquire() {
		t.Fatal("admitted a call over the limit")
	}
	// The limit's 10th sample starts a probe; 10 calls are in flight.
	for i := range limit {
		l.release(10*time.Millisecond, false)
		if !l.tryAcquire() {
			if i != limit-1 {
				t.Fatalf("refused a call at sample %d, before the probe", i+1)
			}
		}
	}
	if got, inflight, _ := l.state(); got != minLimit || l.probe != limit+minLimit {
		t.Fatalf("after the period: limit %d (%d in flight), probe %d; want %d and a probe of %d", got, inflight, l.probe, minLimit, limit+minLimit)
	}
	// Drain: no call is admitted until fewer than Min are in flight.
	admitted := 0
	for range limit + minLimit {
		l.release(10*time.Millisecond, false)
		_, inflight, _ := l.state()
		if l.tryAcquire() {
			admitted++
			if inflight >= minLimit {
				t.Fatalf("admitted a call during the probe with %d in flight, Min %d", inflight, minLimit)
			}
		}
	}
	if l.probe != 0 {
		t.Fatalf("probe still has %d samples to go", l.probe)
	}
	if got, _, _ := l.state(); got != limit {
		t.Fatalf("limit after the probe = %d, want %d again", got, limit)
	}
	if admitted == 0 {
		t.Fatal("no call admitted during the probe")
	}
}

// slotServer models a server that runs slots calls at once, each taking
// cost when unqueued: with the limit's worth of calls in flight (saturated
// load, calls over the limit shed), a call's latency is cost × max(1,
// inflight / slots) (Little's law).
func slotServer(l *adaptiveLimiter, n, slots int, cost time.Duration) []float64 {
	out := make([]float64, 0, n)
	for i := 0; i < n; i++ {
		inflight := l.capLocked()
		l.limited = true // saturated: calls over the limit are shed
		rtt := time.Duration(float64(cost) * max(1, float64(inflight)/float64(slots)))
		l.update(rtt, inflight, false)
		out = append(out, l.limit)
	}
	return out
}

// gradientSettle is where the default gradient limit settles on a
// slotServer: Tolerance × slots + QueueSize.
func gradientSettle(slots int) float64 {
	return DefaultAdaptiveTolerance*float64(slots) + DefaultAdaptiveQueueSize
}

// TestAdaptiveGradientFallsAndRecovers: on a saturated server that runs 8
// calls at once, a limit of 60 falls (never rising on the way) to settle
// at Tolerance × 8 + QueueSize; when the server then runs 32 at once
// (latency drops), the limit grows back to settle at Tolerance × 32 +
// QueueSize.
func TestAdaptiveGradientFallsAndRecovers(t *testing.T) {
	l := newAdaptiveLimiter(AdaptiveLimit{Initial: 60})
	l.update(10*time.Millisecond, 1, false) // the no-load baseline
	got := slotServer(l, 300, 8, 10*time.Millisecond)
	for i := 1; i < len(got); i++ {
		if got[i] > got[i-1] {
			t.Fatalf("limit rose from %v to %v at sample %d over a queue", got[i-1], got[i], i)
		}
	}
	if want, last := gradientSettle(8), got[len(got)-1]; last < want-1 || last > want+1 {
		t.Fatalf("limit = %v after 300 samples at 8 slots, want %v ± 1", last, want)
	}
	got = slotServer(l, 1000, 32, 10*time.Millisecond)
	if want, last := gradientSettle(32), got[len(got)-1]; last < want-1 || last > want+1 {
		t.Fatalf("limit = %v after 1000 samples at 32 slots, want %v ± 1", last, want)
	}
}

// TestAdaptiveGradientLearnsSlowerHandlers: when every call takes twice as
// long for good (not a queue), the limit first falls, then, once the
// no-load latency's windows have rolled over, settles back where it was.
func TestAdaptiveGradientLearnsSlowerHandlers(t *testing.T) {
	l := newAdaptiveLimiter(AdaptiveLimit{Initial: 4})
	l.update(10*time.Millisecond, 1, false)
	want := gradientSettle(8)
	if last := slotServer(l, 500, 8, 10*time.Millisecond); last[len(last)-1] < want-1 {
		t.Fatalf("limit = %v at 8 slots, want about %v", last[len(last)-1], want)
	}
	got := slotServer(l, 50, 8, 20*time.Millisecond)
	if last := got[len(got)-1]; last >= want-1 {
		t.Fatalf("limit = %v after 50 samples twice as slow, want below %v", last, want-1)
	}
	// Windows of ProbeMultiplier × limit, at most 30 × 14 samples each.
	got = slotServer(l, 3000, 8, 20*time.Millisecond)
	if l.noLoad.get() != 20*time.Millisecond {
		t.Fatalf("no-load latency = %v, want the new 20ms", l.noLoad.get())
	}
	if last := got[len(got)-1]; last < want-1 || last > want+1 {
		t.Fatalf("limit = %v after the handlers slowed, want %v ± 1 again", last, want)
	}
}

// TestAdaptiveLimitSettlesNearCapacity: on a saturated server running 4
// calls at once, the default gradient limit settles within a call or two
// of the 4, where Vegas keeps 3-6 more calls queued.
func TestAdaptiveLimitSettlesNearCapacity(t *testing.T) {
	for _, alg := range algorithms {
		l := newAdaptiveLimiter(AdaptiveLimit{Algorithm: alg})
		l.update(time.Millisecond, 1, false)
		got := slotServer(l, 2000, 4, time.Millisecond)
		last := got[len(got)-1]
		switch alg {
		case AdaptiveGradient:
			if want := gradientSettle(4); last < want-1 || last > want+1 {
				t.Fatalf("%v: limit = %v on 4 slots, want %v ± 1", alg, last, want)
			}
		case AdaptiveVegas:
			if last < 7 || last > 11 {
				t.Fatalf("%v: limit = %v on 4 slots, want 7-11 (3-6 queued)", alg, last)
			}
		}
	}
}

func TestAdaptiveLimitDefaultsAndClamp(t *testing.T) {
	l := newAdaptiveLimiter(AdaptiveLimit{})
	if l.limit != DefaultAdaptiveInitial || l.cfg.Min != DefaultAdaptiveMin || l.cfg.Max != DefaultAdaptiveMax || l.cfg.ProbeMultiplier != DefaultAdaptiveProbeMultiplier ||
		l.cfg.Algorithm != AdaptiveGradient || l.cfg.Tolerance != DefaultAdaptiveTolerance || l.cfg.QueueSize != DefaultAdaptiveQueueSize || l.cfg.Smoothing != DefaultAdaptiveSmoothing {
		t.Fatalf("defaults = %+v, limit %v", l.cfg, l.limit)
	}
	l = newAdaptiveLimiter(AdaptiveLimit{Initial: 500, Max: 10, Tolerance: 0.5, Smoothing: 2})
	if l.limit != 10 || l.cfg.Tolerance != 1 || l.cfg.Smoothing != DefaultAdaptiveSmoothing {
		t.Fatalf("initial over max, tolerance 0.5, smoothing 2: limit = %v, cfg %+v; want 10, tolerance 1, default smoothing", l.limit, l.cfg)
	}
}

func TestAdaptiveLimiterAcquire(t *testing.T) {
	l := newAdaptiveLimiter(AdaptiveLimit{Initial: 2, Min: 2, Max: 2})
	if !l.tryAcquire() || !l.tryAcquire() {
		t.Fatal("could not take the 2 slots of the limit")
	}
	if l.tryAcquire() {
		t.Fatal("a third call was admitted over a limit of 2")
	}
	if _, inflight, shed := l.state(); inflight != 2 || shed != 1 {
		t.Fatalf("inflight %d shed %d, want 2 and 1", inflight, shed)
	}
	got := make(chan bool)
	go func() { got <- l.acquire(make(chan struct{})) }()
	l.release(0, false)
	if !<-got {
		t.Fatal("a waiting acquire failed after a release")
	}
	done := make(chan struct{})
	close(done)
	if l.acquire(done) {
		t.Fatal("acquire over the limit succeeded with done closed")
	}
}

// TestAdaptiveLimitNoProbeWithoutShedding: a server whose limit is never
// reached does not probe, however many calls run at once: no call is
// refused for the probe's sake.
func TestAdaptiveLimitNoProbeWithoutShedding(t *testing.T) {
	l := newAdaptiveLimiter(AdaptiveLimit{Initial: 40, Max: 40, ProbeMultiplier: 1})
	for i := range 1000 {
		l.update(10*time.Millisecond+time.Duration(i%7)*time.Millisecond, 30, false)
		if l.probe != 0 {
			t.Fatalf("probe started at sample %d without a shed call", i+1)
		}
	}
	if got, _, _ := l.state(); got < 30 {
		t.Fatalf("limit = %d, want at least the 30 in flight", got)
	}
}
