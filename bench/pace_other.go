//go:build !linux

package bench

import "time"

// pacer sleeps the open-loop generator between issues (time.Sleep here;
// see pace_linux.go).
type pacer struct{}

func newPacer() pacer               { return pacer{} }
func (pacer) sleep(d time.Duration) { time.Sleep(d) }
func (pacer) stop()                 {}
