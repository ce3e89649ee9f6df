package server

import "time"

// maxIdleHandlers bounds the handler goroutines a Server keeps waiting for
// the next request (without WithWorkerPool). The idle set grows to the
// most calls that ran at once, up to this bound, and stays: at the 8-16
// KiB of stack a call grows, at most about 16 MiB. With 1000 callers on one
// connection a bound of 256 had handlers beyond it exit and new ones start
// (and grow their stacks) all the time: 8% of the process's CPU in a
// profile, none with 1024.
const maxIdleHandlers = 1024

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
		go runFresh(t)
	}
}

// runFresh is runTask on a new goroutine: it first grows the goroutine's
// stack to what a call needs, while the stack is still shallow.
func runFresh(t task) {
	_ = growStack()
	_ = runTask(t)
}

// handlerStack is the stack, in bytes, that growStack reserves: about what
// decoding, a call through package reflect and encoding take.
const handlerStack = 8 << 10

// stackIndex is the byte of its frame that growStack reads, so that the
// frame is not optimised away. It is never written.
var stackIndex = 0

// growStack makes the runtime grow the calling goroutine's stack to hold a
// frame of handlerStack bytes, once, while the stack is nearly empty: the
// runtime then copies a few frames, where growing it later, deep inside a
// handler, copies and adjusts every frame of the call (several times, the
// stack doubling from its small start). A goroutine whose stack is already
// large pays only the zeroing of the frame. It returns a byte of the
// frame (zero) so that the frame is kept.
//
//go:noinline
func growStack() byte {
	var frame [handlerStack]byte
	return frame[stackIndex%len(frame)]
}

// idleFrame is the frame, in bytes, that runTask keeps on the stack: a
// quarter of the 16 KiB stack a handler goroutine has after growStack.
const idleFrame = 4 << 10

// idleWait waits for the next task on s.idle. It is the top frame of an
// idle handler goroutine in stack dumps.
//
//go:noinline
func idleWait(s *Server) task { return <-s.idle }

// runTask runs a request, then waits for more (see handoff) while fewer
// than maxIdleHandlers goroutines wait, until the server stops.
//
// It waits inside a frame of idleFrame bytes. The garbage collector halves
// the stack of a goroutine that uses less than a quarter of it
// (runtime.shrinkstack, at each cycle), so an idle handler waiting in a
// shallow frame lost its grown stack at every collection and grew it
// again, deep inside its next call (copystack 9-11 % of the server's CPU at
// 1000 callers). Waiting below this frame keeps the stack in use above the
// quarter. The frame is zeroed once per goroutine, not once per wait (in a
// frame of its own that zeroing was 1-2 % of the server's CPU at 100
// callers). It returns a byte of the frame (zero) so that it is kept.
func runTask(t task) byte {
	var frame [idleFrame]byte
	s := t.c.s
	for {
		t.run()
		t = task{} // hold nothing while idle
		if s.idleN.Add(1) > maxIdleHandlers {
			s.idleN.Add(-1)
			break
		}
		// Wait on the idle channel alone: a select that also waited on
		// stopped would queue every idle goroutine on that one channel and
		// lock it on every hand-off (5% of the CPU at 1000 callers). The
		// stop is checked once here, after counting this goroutine idle;
		// stopIdle, which runs after stopped is closed, wakes those already
		// waiting with an empty task.
		select {
		case <-s.stopped:
			s.idleN.Add(-1)
			return frame[stackIndex%len(frame)]
		default:
		}
		t = idleWait(s)
		s.idleN.Add(-1)
		if t.c == nil {
			break // stopIdle's
		}
	}
	return frame[stackIndex%len(frame)]
}

// stopIdle ends the idle handler goroutines once stopped is closed: each
// waiting one takes an empty task and returns; one counted idle but not
// yet waiting sees stopped closed and returns by itself.
func (s *Server) stopIdle() {
	for s.idleN.Load() > 0 {
		select {
		case s.idle <- task{}:
		case <-time.After(time.Millisecond): // it returned by itself
		}
	}
}
