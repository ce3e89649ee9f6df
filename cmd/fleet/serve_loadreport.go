package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"
)

// loadReportInterval is how often fleet demo --serve --load reports its
// failed calls.
const loadReportInterval = 5 * time.Second

// loadStats counts the outcomes of the demo's load calls. Safe for
// concurrent use.
type loadStats struct {
	mu         sync.Mutex
	ok, failed int
	last       error // the last failure of the interval
}

func (s *loadStats) record(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		s.ok++
		return
	}
	s.failed++
	s.last = err
}

// take returns the counts since the previous take and resets them.
func (s *loadStats) take() (ok, failed int, last error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ok, failed, last = s.ok, s.failed, s.last
	s.ok, s.failed, s.last = 0, 0, nil
	return ok, failed, last
}

// reportLoad writes to w, every interval until ctx ends, a line for each
// interval in which calls of the load failed (how many, and the last
// error with its code), and one line when calls succeed again after
// such an interval; nothing while every call succeeds. It returns when
// ctx ends.
func (pg *playground) reportLoad(ctx context.Context, w io.Writer, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ok, failed, last := pg.stats.take()
		switch {
		case failed > 0:
			failing = true
			// Worded as fleet call words a failed call.
			fmt.Fprintf(w, "load: %d of %d Arith.Add calls failed in the last %v; the last: %v\n",
				failed, ok+failed, every, &callError{"Arith.Add", last})
		case failing && ok > 0:
			failing = false
			fmt.Fprintf(w, "load: Arith.Add calls succeed again (%d in the last %v)\n", ok, every)
		}
	}
}
