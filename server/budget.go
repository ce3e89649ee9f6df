package server

import (
	"context"
	"sync"
	"sync/atomic"
)

// memBudget counts the request bytes held by running handlers of the whole
// server and lets read loops wait for room. The zero value with max 0 never
// makes anyone wait. Safe for concurrent use.
type memBudget struct {
	max     int64 // <= 0: no limit
	used    atomic.Int64
	waiting atomic.Bool
	mu      sync.Mutex
	ch      chan struct{} // closed (and cleared) when bytes are released
}

// acquire counts n bytes as held.
func (b *memBudget) acquire(n int64) { b.used.Add(n) }

// release returns n bytes and wakes the waiters.
func (b *memBudget) release(n int64) {
	b.used.Add(-n)
	if b.waiting.Load() {
		b.mu.Lock()
		if b.ch != nil {
			close(b.ch)
			b.ch = nil
		}
		b.waiting.Store(false)
		b.mu.Unlock()
	}
}

// wait blocks until n more bytes fit in the budget, or nothing is held
// but the caller's own bytes (so that one request larger than the budget
// still runs, alone), or ctx ends; it reports whether there is room.
func (b *memBudget) wait(ctx context.Context, n, own int64) bool {
	for {
		u := b.used.Load()
		if b.max <= 0 || u-own <= 0 || u+n <= b.max {
			return true
		}
		b.mu.Lock()
		if b.ch == nil {
			b.ch = make(chan struct{})
		}
		ch := b.ch
		b.waiting.Store(true)
		// Re-check after announcing the wait: a release that ran before
		// the store above is seen here, one after it closes ch.
		if u := b.used.Load(); u-own <= 0 || u+n <= b.max {
			b.mu.Unlock()
			return true
		}
		b.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}
