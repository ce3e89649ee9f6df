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
	waiters atomic.Int64  // reserve calls waiting for room (Stats)
	refused atomic.Uint64 // charges refused (tryCharge)
	mu      sync.Mutex
	ch      chan struct{} // closed (and cleared) when bytes are released
}

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

// fits reports whether n more bytes fit when u are held, own of them by
// the caller: under the limit, or nothing held but the caller's own (so
// that one request larger than the budget still runs, alone).
func (b *memBudget) fits(u, n, own int64) bool {
	return b.max <= 0 || u-own <= 0 || u+n <= b.max
}

// tryReserve adds n bytes if they fit now (see fits).
func (b *memBudget) tryReserve(n, own int64) bool {
	for {
		u := b.used.Load()
		if !b.fits(u, n, own) {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

// reserve waits until n more bytes fit (see fits) and adds them, checking
// and adding in one atomic step so that waiters woken together cannot all
// go past the limit. It reports false when ctx ends first.
func (b *memBudget) reserve(ctx context.Context, n, own int64) bool {
	if b.tryReserve(n, own) {
		return true
	}
	b.waiters.Add(1)
	defer b.waiters.Add(-1)
	for {
		if b.tryReserve(n, own) {
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
		if b.fits(b.used.Load(), n, own) {
			b.mu.Unlock()
			continue
		}
		b.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}
