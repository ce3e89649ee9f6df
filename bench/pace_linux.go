//go:build linux

package bench

import (
	"runtime"
	"syscall"
	"time"
)

// pacer sleeps the open-loop generator between issues. time.Sleep cannot
// serve: below a millisecond it sleeps at least about 1 ms whenever the
// process is otherwise idle (the Go runtime then waits for its timers in
// epoll_wait, whose timeout is in whole milliseconds), which turned a
// 200 µs pacing into bursts of about 7 calls every 1.08 ms, in step with
// the handlers' 1 ms sleeps. nanosleep(2) on a thread of its own sleeps
// the interval asked (plus the kernel's timer slack, 50 µs by default)
// without spinning.
type pacer struct{}

// newPacer locks the calling goroutine to its thread until stop.
func newPacer() pacer { runtime.LockOSThread(); return pacer{} }

// sleep sleeps about d.
func (pacer) sleep(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
	}
}

func (pacer) stop() { runtime.UnlockOSThread() }
