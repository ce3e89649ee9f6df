package server

// maxIdleHandlers bounds the handler goroutines a Server keeps waiting for
// the next request (without WithWorkerPool). At a few KiB of stack each,
// the idle set costs at most about 2 MiB.
const maxIdleHandlers = 256

// handoff runs one request on a handler goroutine that finished an
// earlier request and is waiting for work, or on a new goroutine when none
// is waiting. Reusing goroutines keeps their stacks grown: a fresh
// goroutine starts with a small stack, and growing it (the runtime copies
// the stack) while decoding, calling through package reflect and encoding
// costs a tenth or more of a call's server CPU.
func (s *Server) handoff(t task) {
	select {
	case s.idle <- t:
	default:
		go runTask(t)
	}
}

// runTask runs a request, then waits for more (see handoff) while fewer
// than maxIdleHandlers goroutines wait, until the server stops.
func runTask(t task) {
	s := t.c.s
	for {
		t.run()
		t = task{} // hold nothing while idle
		if s.idleN.Add(1) > maxIdleHandlers {
			s.idleN.Add(-1)
			return
		}
		select {
		case t = <-s.idle:
			s.idleN.Add(-1)
		case <-s.stopped:
			s.idleN.Add(-1)
			return
		}
	}
}
