package main

import (
	"context"
	"sync"
	"time"
)

// historyWindow is how much load history the dashboard keeps per server,
// sampled every historyInterval: the span of the page's charts.
const (
	historyWindow   = 5 * time.Minute
	historyInterval = time.Second
)

// loadHistory keeps, per server address, the load samples of the last
// window, so that a page opened now shows the recent past. Safe for
// concurrent use.
type loadHistory struct {
	window time.Duration
	mu     sync.Mutex
	byAddr map[string][]apiPoint // oldest first
}

func newLoadHistory(window time.Duration) *loadHistory {
	return &loadHistory{window: window, byAddr: map[string][]apiPoint{}}
}

// add records one sample of every server in s taken at now, and forgets
// samples (and servers) older than the window.
func (h *loadHistory) add(now time.Time, servers []apiServer) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := now.UnixMilli()
	for _, sv := range servers {
		h.byAddr[sv.Addr] = append(h.byAddr[sv.Addr], apiPoint{T: t, CallsPerSecond: sv.CallsPerSecond, P99Ms: sv.P99Ms})
	}
	oldest := now.Add(-h.window).UnixMilli()
	for a, pts := range h.byAddr {
		i := 0
		for i < len(pts) && pts[i].T < oldest {
			i++
		}
		switch {
		case i == len(pts):
			delete(h.byAddr, a)
		case i > 0:
			h.byAddr[a] = append(pts[:0], pts[i:]...)
		}
	}
}

// points returns a copy of addr's samples, oldest first.
func (h *loadHistory) points(addr string) []apiPoint {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]apiPoint{}, h.byAddr[addr]...)
}

// sampleLoop reads the registry every historyInterval and records each
// server's load until ctx ends; a failed read records nothing (a gap in
// the charts).
func (d *dashboard) sampleLoop(ctx context.Context) {
	defer close(d.done)
	tick := time.NewTicker(historyInterval)
	defer tick.Stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, historyInterval)
		s := d.snapshot(rctx)
		cancel()
		if s.Error == "" {
			d.hist.add(time.Now(), s.Servers)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
