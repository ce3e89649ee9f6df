package bench_test

import (
	"context"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fleetrpc/fleet/bench"
)

// TestSoakNoGrowth runs a 60 s soak (calls, failing calls, oneway sends,
// reconnects, registry churn) and fails on clear growth. The bounds are
// far above the noise of a loaded 2-core machine under -race, and none is
// a timing: once the load has stopped and every client and server is
// closed, goroutines and open fds come back within 20 of where they
// started (polled for up to 20 s); the live heap (after GC) ends within
// 32 MiB of where it started; over the second half the live heap grows by
// less than 64 MiB/min. The load must have exercised every kind of
// traffic at least once.
func TestSoakNoGrowth(t *testing.T) {
	res, err := bench.Soak(context.Background(), bench.SoakOptions{
		Duration: 60 * time.Second,
		Callers:  4,
		Pause:    2 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	bench.WriteSoak(&b, res)
	t.Log("\n" + b.String())
	if res.Calls == 0 || res.Oneway == 0 || res.Failed == 0 || res.Reconnects == 0 || res.Churns == 0 {
		t.Fatalf("some traffic never ran: %+v", res)
	}
	if len(res.Samples) < 4 {
		t.Fatalf("%d samples in %.0f s", len(res.Samples), res.Seconds)
	}
	countFDs := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			return 0
		}
		return len(ents)
	}
	var g, fds int
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		g, fds = runtime.NumGoroutine(), countFDs()
		if g <= res.Before.Goroutines+20 && fds <= res.Before.FDs+20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the soak: %d goroutines (%d before), %d open fds (%d before)", g, res.Before.Goroutines, fds, res.Before.FDs)
		}
	}
	const MiB = 1 << 20
	if grew := res.After.Heap - res.Before.Heap; grew > 32*MiB {
		t.Fatalf("live heap grew by %.1f MiB over the soak", float64(grew)/MiB)
	}
	if res.HeapSlope > 64*MiB {
		t.Fatalf("live heap grows by %.1f MiB/min over the second half", res.HeapSlope/MiB)
	}
}
