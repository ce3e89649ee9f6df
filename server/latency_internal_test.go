package server

import (
	"slices"
	"testing"
	"time"
)

// TestLatencyBuckets: every duration falls in a bucket whose bounds hold
// it, and the upper bound is at most 25% above the lower one (beyond the
// first exact microseconds).
func TestLatencyBuckets(t *testing.T) {
	var ds []time.Duration
	for d := time.Duration(0); d < 3*time.Microsecond; d += 100 * time.Nanosecond {
		ds = append(ds, d)
	}
	for d := time.Microsecond; d < time.Hour; d = d*9/8 + time.Microsecond {
		ds = append(ds, d-time.Microsecond, d, d+time.Microsecond)
	}
	slices.Sort(ds)
	last := 0
	for _, d := range ds {
		i := latBucket(d)
		if i < 0 || i >= latBuckets {
			t.Fatalf("latBucket(%v) = %d", d, i)
		}
		if up := latUpper(i); d >= up {
			t.Fatalf("%v in bucket %d of upper bound %v", d, i, up)
		}
		lower := time.Duration(0)
		if i > 0 {
			lower = latUpper(i - 1)
		}
		if d.Truncate(time.Microsecond) < lower {
			t.Fatalf("%v in bucket %d of lower bound %v", d, i, lower)
		}
		if lower >= 4*time.Microsecond && float64(latUpper(i)) > 1.25*float64(lower) {
			t.Fatalf("bucket %d spans [%v, %v)", i, lower, latUpper(i))
		}
		if i < last {
			t.Fatalf("buckets not monotonic at %v", d)
		}
		last = i
	}
	if i := latBucket(1000 * time.Hour * 24); i != latBuckets-1 {
		t.Fatalf("a very long call lands in bucket %d", i)
	}
}

// TestLatencyQuantileSince: the quantile covers the calls since the last
// reading only.
func TestLatencyQuantileSince(t *testing.T) {
	var h latencyHist
	var prev [latBuckets]uint64
	if q := h.quantileSince(&prev, 0.99); q != 0 {
		t.Fatalf("no calls: p99 %v", q)
	}
	for range 99 {
		h.observe(100 * time.Microsecond)
	}
	h.observe(50 * time.Millisecond)
	fast := latUpper(latBucket(100 * time.Microsecond))
	if q := h.quantileSince(&prev, 0.99); q != fast {
		t.Fatalf("99 calls of 100µs, 1 of 50ms: p99 %v, want %v", q, fast)
	}
	for range 98 {
		h.observe(100 * time.Microsecond)
	}
	h.observe(50 * time.Millisecond)
	h.observe(50 * time.Millisecond)
	slow := latUpper(latBucket(50 * time.Millisecond))
	if q := h.quantileSince(&prev, 0.99); q != slow {
		t.Fatalf("98 calls of 100µs, 2 of 50ms: p99 %v, want %v", q, slow)
	}
	if slow < 50*time.Millisecond || slow > 63*time.Millisecond {
		t.Fatalf("the 50ms bucket's upper bound is %v", slow)
	}
	if q := h.quantileSince(&prev, 0.99); q != 0 {
		t.Fatalf("nothing new: p99 %v", q)
	}
}

// TestLatencyObserveAllocs: measuring a call allocates nothing.
func TestLatencyObserveAllocs(t *testing.T) {
	var h latencyHist
	h.on.Store(true)
	if n := testing.AllocsPerRun(100, func() {
		h.done(h.start())
	}); n != 0 {
		t.Fatalf("%v allocations per observation", n)
	}
}

// BenchmarkLatencyObserve is what measuring adds to a call: two clock
// reads and an atomic add, from one goroutine and from all of them (calls
// of similar duration share a counter); "off" is a server that does not
// publish load.
//
//	go test -run '^$' -bench LatencyObserve -benchmem ./server/
func BenchmarkLatencyObserve(b *testing.B) {
	var h latencyHist
	b.Run("off", func(b *testing.B) {
		for b.Loop() {
			h.done(h.start())
		}
	})
	h.on.Store(true)
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			h.done(h.start())
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				h.done(h.start())
			}
		})
	})
}
