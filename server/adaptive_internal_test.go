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

func TestAdaptiveLimitGrowsWithoutQueueing(t *testing.T) {
	l := newAdaptiveLimiter(AdaptiveLimit{Initial: 20})
	got := feed(l, 100, 10*time.Millisecond, full, false)
	for i := 1; i < len(got); i++ {
		if got[i] < got[i-1] {
			t.Fatalf("limit fell from %v to %v at sample %d with constant latency", got[i-1], got[i], i)
		}
	}
	if got[len(got)-1] <= 20 {
		t.Fatalf("limit = %v after 100 unqueued samples, want above the initial 20", got[len(got)-1])
	}
	if got[len(got)-1] > DefaultAdaptiveMax {
		t.Fatalf("limit = %v, over the default max", got[len(got)-1])
	}
}

func TestAdaptiveLimitShrinksWhenLatencyRises(t *testing.T) {
	l := newAdaptiveLimiter(AdaptiveLimit{Initial: 100, Min: 5})
	l.update(10*time.Millisecond, 100, false) // the no-load baseline
	got := feed(l, 200, 40*time.Millisecond, full, false)
	if got[0] >= 100 {
		t.Fatalf("limit = %v after a queued sample, want below 100", got[0])
	}
	for i := 1; i < len(got); i++ {
		if got[i] > got[i-1] {
			t.Fatalf("limit rose from %v to %v at sample %d with latency 4x the baseline", got[i-1], got[i], i)
		}
	}
	// Vegas settles where the estimated queue is within 6 log10(limit):
	// far below where it started, never below Min.
	if last := got[len(got)-1]; last >= 20 || last < 5 {
		t.Fatalf("limit = %v after 200 queued samples, want in [5, 20)", last)
	}
}

func TestAdaptiveLimitDropShrinks(t *testing.T) {
	l := newAdaptiveLimiter(AdaptiveLimit{Initial: 50})
	l.update(10*time.Millisecond, 50, false)
	l.update(10*time.Millisecond, 50, true)
	if l.limit >= 50 {
		t.Fatalf("limit = %v after a dropped call, want below 50", l.limit)
	}
}

func TestAdaptiveLimitAppLimitedHolds(t *testing.T) {
	l := newAdaptiveLimiter(AdaptiveLimit{Initial: 50})
	got := feed(l, 50, 10*time.Millisecond, func(float64) int { return 3 }, false)
	for _, v := range got {
		if v != 50 {
			t.Fatalf("limit moved to %v with 3 of 50 in flight", v)
		}
	}
}

func TestAdaptiveLimitProbeResetsBaseline(t *testing.T) {
	l := newAdaptiveLimiter(AdaptiveLimit{Initial: 4, Min: 4, Max: 4, ProbeMultiplier: 1})
	l.update(10*time.Millisecond, 4, false)
	feed(l, 5, 50*time.Millisecond, full, false)
	if l.rttNoLoad != 50*time.Millisecond {
		t.Fatalf("no-load latency = %v after a probe, want the new 50ms", l.rttNoLoad)
	}
}

func TestAdaptiveLimitDefaultsAndClamp(t *testing.T) {
	l := newAdaptiveLimiter(AdaptiveLimit{})
	if l.limit != DefaultAdaptiveInitial || l.cfg.Min != DefaultAdaptiveMin || l.cfg.Max != DefaultAdaptiveMax || l.cfg.ProbeMultiplier != DefaultAdaptiveProbeMultiplier {
		t.Fatalf("defaults = %+v, limit %v", l.cfg, l.limit)
	}
	l = newAdaptiveLimiter(AdaptiveLimit{Initial: 500, Max: 10})
	if l.limit != 10 {
		t.Fatalf("initial over max: limit = %v, want 10", l.limit)
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
