package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Latency summarizes per-call latencies; durations are in nanoseconds in
// JSON.
type Latency struct {
	Mean time.Duration `json:"mean_ns"`
	Min  time.Duration `json:"min_ns"`
	P50  time.Duration `json:"p50_ns"`
	P90  time.Duration `json:"p90_ns"`
	P99  time.Duration `json:"p99_ns"`
	P999 time.Duration `json:"p999_ns"`
	Max  time.Duration `json:"max_ns"`
	// Curve is the latency at the percentiles of curvePercentiles, for
	// the percentile charts.
	Curve []time.Duration `json:"curve_ns,omitempty"`
}

// curvePercentiles are the points of Latency.Curve.
var curvePercentiles = []float64{0, 50, 75, 90, 95, 99, 99.5, 99.9, 99.95, 99.99, 100}

// summarize computes the latency summary of samples, sorting them.
func summarize(samples []time.Duration) Latency {
	if len(samples) == 0 {
		return Latency{}
	}
	slices.Sort(samples)
	var sum float64
	for _, s := range samples {
		sum += float64(s)
	}
	l := Latency{
		Mean: time.Duration(sum / float64(len(samples))),
		Min:  samples[0],
		P50:  percentile(samples, 50),
		P90:  percentile(samples, 90),
		P99:  percentile(samples, 99),
		P999: percentile(samples, 99.9),
		Max:  samples[len(samples)-1],
	}
	for _, p := range curvePercentiles {
		l.Curve = append(l.Curve, percentile(samples, p))
	}
	return l
}

// percentile returns the nearest-rank percentile p (0–100) of sorted.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// load describes one closed-loop measurement: callers goroutines call op
// back to back until total calls have been issued (0 = no limit) or the
// duration has passed, whichever comes first.
type load struct {
	callers  int
	total    int64
	duration time.Duration
	// grace bounds how long in-flight calls may take after duration.
	grace   time.Duration
	latency bool // record per-call latencies
	label   string
}

// loadResult is what a load measured.
type loadResult struct {
	calls     int64 // completed calls, failed ones included
	errors    int64
	abandoned int64 // calls still waiting when the grace period ended
	firstErr  error
	elapsed   time.Duration // from the start until the last call returned
	capped    bool          // stopped by the duration, not the total
	samples   []time.Duration
}

func (r loadResult) throughput() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.calls-r.errors) / r.elapsed.Seconds()
}

// run drives op under l. op gets the call's sequence number (from 1).
func (l load) run(ctx context.Context, prog *progress, op func(ctx context.Context, i int64) error) loadResult {
	grace := l.grace
	if grace <= 0 {
		grace = time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, l.duration+grace)
	defer cancel()
	var issued, errs, abandoned atomic.Int64
	var capped atomic.Bool
	var firstMu sync.Mutex
	var first error
	per := make([][]time.Duration, l.callers)
	done := make([]int64, l.callers)
	if prog != nil {
		prog.begin(l.label, l.total, &issued)
		defer prog.end()
	}
	start := time.Now()
	stop := start.Add(l.duration)
	var wg sync.WaitGroup
	for g := range l.callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var samples []time.Duration
			if l.latency {
				n := 1024
				if l.total > 0 {
					n = int(l.total/int64(l.callers)) + 1
				}
				samples = make([]time.Duration, 0, n)
			}
			for {
				t0 := time.Now()
				if t0.After(stop) {
					capped.Store(true)
					break
				}
				i := issued.Add(1)
				if l.total > 0 && i > l.total {
					break
				}
				err := op(ctx, i)
				if err != nil && ctx.Err() != nil {
					// Still waiting when the grace period ran out.
					abandoned.Add(1)
					break
				}
				done[g]++
				if l.latency {
					samples = append(samples, time.Since(t0))
				}
				if err != nil && errs.Add(1) == 1 {
					firstMu.Lock()
					first = err
					firstMu.Unlock()
				}
			}
			per[g] = samples
		}()
	}
	wg.Wait()
	r := loadResult{elapsed: time.Since(start), errors: errs.Load(), abandoned: abandoned.Load(), firstErr: first, capped: capped.Load()}
	for _, n := range done {
		r.calls += n
	}
	if l.latency {
		r.samples = make([]time.Duration, 0, r.calls)
		for _, s := range per {
			r.samples = append(r.samples, s...)
		}
	}
	return r
}

// errString formats a result's first error for reports.
func (r loadResult) errString() string {
	if r.firstErr == nil {
		return ""
	}
	return fmt.Sprintf("%d errors, first: %v", r.errors, r.firstErr)
}
