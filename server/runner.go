package server

import "github.com/fleetrpc/fleet/internal/bufpool"

// runFunc is the seam behind which an admitted native call's handler is
// run: it takes over t (the call, admitted and charged to the budgets) and
// runs t.run somewhere. fromReader: it is called on the connection's read
// loop. It reports whether the read loop is still the calling goroutine's
// (false only after an inline run was handed over; the caller then
// returns without touching the loop's state). New chooses one, once:
//
//   - runPooled (WithWorkerPool): the call is queued to the fixed pool of
//     workers; the read loop stops while the queue is full.
//   - runReused (the default): a serial caller's lone call (FlagSole, no
//     other call running, nothing more buffered) runs inline, on the read
//     loop (runInline, inline.go); any other call goes to a waiting
//     handler goroutine that keeps its grown stack, or to a new one
//     (handoff, reuse.go).
//
// An inline run is handed over, not waited for, when it lasts; the state
// of a connection's read loop (conn.inline's low bits) moves as follows:
//
//	                 lone call arrives
//	                 (runInline: idle -> running)
//	+---------+ -------------------------------> +----------------+
//	| reading |                                  | running inline |
//	+---------+ <------------------------------- +----------------+
//	     ^         call returns first                    |
//	     |         (runInline: CAS running -> idle;      | monitor tick x2: seen
//	     |          the goroutine reads on)              | running at two scans
//	     |                                               | (scanInline: CAS
//	     |                                               |  running -> handed)
//	     |                                               v
//	     |      readOn: a new goroutine              +------------+
//	     +------------------------------------------ | handed off |
//	            is the read loop                     +------------+
//	                                                     |
//	                  call returns: runInline's CAS fails, it reports
//	                  false and its goroutine ends the call only
//
// Exactly one of the two compare-and-swaps on running wins, so the read
// loop has one owner at a time. The hand-over takes one to two
// inlineTicks; no timer is set per call.
type runFunc func(t task, fromReader bool) (reader bool)

// runPooled queues t to the worker pool (WithWorkerPool).
func (s *Server) runPooled(t task, _ bool) bool {
	select {
	case s.tasks <- t:
	case <-s.stopped: // the pool stopped under us: Close raced
		t.abandon()
	}
	return true
}

// runReused runs t inline when it is a lone call read by the read loop,
// else on a reused or new handler goroutine.
func (s *Server) runReused(t task, fromReader bool) bool {
	if fromReader && t.c.lone(&t.f) && t.c.r.Buffered() == 0 {
		return t.c.runInline(t)
	}
	s.handoff(t)
	return true
}

// abandon gives back what an admitted call holds when it will not run.
func (t *task) abandon() {
	c := t.c
	c.dropAdaptive(t.lim)
	t.slot.leave()
	c.active.Add(-1)
	c.s.inflight.Add(-1)
	c.release(t.cost)
	bufpool.Put(t.buf)
	if t.cctx != nil {
		t.cctx.end()
	}
}
