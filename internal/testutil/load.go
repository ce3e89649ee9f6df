package testutil

import (
	"sync"
	"sync/atomic"
	"time"
)

// Load runs call from n goroutines, each calling in a loop (sleeping pause
// between calls, when not zero) until Stop. worker is the goroutine's
// index, 0 to n-1. Its methods are safe for concurrent use.
type Load struct {
	ok, failed atomic.Int64
	firstErr   atomic.Pointer[error]
	stop       chan struct{}
	wg         sync.WaitGroup
}

// StartLoad starts the goroutines and returns at once.
func StartLoad(n int, pause time.Duration, call func(worker int) error) *Load {
	l := &Load{stop: make(chan struct{})}
	for i := 0; i < n; i++ {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				if err := call(i); err != nil {
					l.failed.Add(1)
					l.firstErr.CompareAndSwap(nil, &err)
				} else {
					l.ok.Add(1)
				}
				if pause > 0 {
					select {
					case <-l.stop:
						return
					case <-time.After(pause):
					}
				}
			}
		}()
	}
	return l
}

// OK is the number of calls that returned nil so far.
func (l *Load) OK() int64 { return l.ok.Load() }

// Stop ends the load, waits for the goroutines, and returns the number of
// successful and failed calls and the first error (nil when none failed).
func (l *Load) Stop() (ok, failed int64, first error) {
	close(l.stop)
	l.wg.Wait()
	if p := l.firstErr.Load(); p != nil {
		first = *p
	}
	return l.ok.Load(), l.failed.Load(), first
}
