package server

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// latBuckets is the number of buckets of latencyHist: four per power of
// two of microseconds (the first four hold 0, 1, 2 and 3 µs exactly), up
// to 2^40 µs (about 12 days), the last bucket holding anything longer.
const latBuckets = 160

// latencyHist counts how long the server took to handle calls, in
// log-spaced buckets of fixed bounds, as HdrHistogram does with two
// sub-bucket bits (Gil Tene, "HdrHistogram: A High Dynamic Range
// Histogram"): a bucket spans a quarter of a power of two, so a quantile
// read as its bucket's upper bound is at most 25% above the true value.
// observe is lock-free and does not allocate; the counts only grow, and
// readers take differences of snapshots. Safe for concurrent use.
type latencyHist struct {
	on atomic.Bool // set by the first Publish with load reports
	n  [latBuckets]atomic.Uint64
}

// start returns the time a call starts, or the zero time when nothing
// reads the histogram (no Publish with load reports), so that servers
// that do not publish pay no clock reads.
func (h *latencyHist) start() time.Time {
	if !h.on.Load() {
		return time.Time{}
	}
	return time.Now()
}

// done counts a call that began at start (from h.start).
func (h *latencyHist) done(start time.Time) {
	if !start.IsZero() {
		h.observe(time.Since(start))
	}
}

// latBucket returns the bucket of d: [lower, upper) in microseconds with
// upper = lower·(1 + 1/(4+sub)).
func latBucket(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	us := uint64(d / time.Microsecond)
	if us < 4 {
		return int(us)
	}
	e := bits.Len64(us) - 1 // us in [2^e, 2^(e+1)), e >= 2
	i := e*4 + int((us>>(e-2))&3) - 4
	return min(i, latBuckets-1)
}

// latUpper returns the exclusive upper bound of bucket i.
func latUpper(i int) time.Duration {
	if i < 4 {
		return time.Duration(i+1) * time.Microsecond
	}
	if i == latBuckets-1 {
		return time.Duration(math.MaxInt64)
	}
	e, sub := i/4+1, i%4
	return time.Duration(uint64(5+sub)<<(e-2)) * time.Microsecond
}

// observe counts one call that took d.
func (h *latencyHist) observe(d time.Duration) { h.n[latBucket(d)].Add(1) }

// quantileSince returns the q-quantile (0 < q <= 1) of the calls counted
// since *prev, as the upper bound of its bucket, and stores the current
// counts into *prev. It returns 0 when no call was counted since.
func (h *latencyHist) quantileSince(prev *[latBuckets]uint64, q float64) time.Duration {
	var delta [latBuckets]uint64
	var total uint64
	for i := range h.n {
		c := h.n[i].Load()
		delta[i] = c - prev[i]
		prev[i] = c
		total += delta[i]
	}
	if total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(total)))
	var seen uint64
	for i, c := range delta {
		if seen += c; seen >= rank {
			return latUpper(i)
		}
	}
	return latUpper(latBuckets - 1)
}
