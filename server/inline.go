package server

import "time"

// The states of a call run on the read loop, in the low two bits of
// conn.inline.
const (
	inlineIdle    = 0 // the read loop reads
	inlineRunning = 1 // the read loop runs a call
	inlineHanded  = 2 // the call ran too long: another goroutine reads
)

// inlineTick is the period of inlineMonitor. A call runs on its read loop
// for one to two ticks at most before another goroutine takes over the
// reading.
const inlineTick = time.Millisecond

// runInline runs t, a serial caller's call (protocol.FlagSole) that is
// the connection's only one, with no further frame read, on the read loop
// itself. This saves the hand-off to a handler goroutine, which costs a
// wake-up, often of another thread, per call. Calls of a connection with
// many callers never carry the flag: their read loop only reads, and
// their handlers run side by side on handler goroutines. So that a slow handler does not stop
// the connection's reading (cancel frames, pings, further calls), the
// server's inlineMonitor starts a new goroutine on the read loop when the
// call still runs one to two inlineTicks later. It reports whether this
// goroutine still owns the read loop; when not, the caller returns without
// touching the loop's state.
//
// No timer is set per call: resetting one would wake the runtime's network
// poller on an idle processor at every call, a context switch as costly as
// the hand-off saved.
func (c *conn) runInline(t task) bool {
	s := c.s
	c.inlineRuns++
	v := c.inlineRuns<<2 | inlineRunning
	c.inline.Store(v)
	if !c.inlineReg {
		c.inlineReg = true
		s.inlineMu.Lock()
		if s.inlineConns == nil {
			s.inlineConns = map[*conn]struct{}{}
		}
		s.inlineConns[c] = struct{}{}
		s.inlineMu.Unlock()
	}
	// After the store above: either this sees the monitor stopped and
	// starts one, or the stopping monitor's last scan sees the run.
	if !s.inlineMon.Load() && s.inlineMon.CompareAndSwap(false, true) {
		go s.inlineMonitor()
	}
	t.run()
	return c.inline.CompareAndSwap(v, v&^3|inlineIdle)
}

// unregisterInline forgets an ended connection.
func (s *Server) unregisterInline(c *conn) {
	s.inlineMu.Lock()
	delete(s.inlineConns, c)
	s.inlineMu.Unlock()
}

// inlineMonitor hands the read loop of a connection over to a new
// goroutine when a call has run on it since the previous tick. It runs
// while calls run inline and stops after two ticks without any (or when
// the server stops), so an idle server has no ticker.
func (s *Server) inlineMonitor() {
	tk := time.NewTicker(inlineTick)
	defer tk.Stop()
	quiet := 0
	for {
		select {
		case <-tk.C:
		case <-s.stopped:
			s.inlineMon.Store(false)
			return
		}
		if s.scanInline() {
			quiet = 0
			continue
		}
		if quiet++; quiet < 2 {
			continue
		}
		s.inlineMon.Store(false)
		// A run that began before the store is seen by this scan; one
		// that begins after it sees the monitor stopped (runInline).
		if !s.scanInline() || !s.inlineMon.CompareAndSwap(false, true) {
			return
		}
		quiet = 0
	}
}

// scanInline looks at each registered connection's inline runs: a run
// already seen running at the last scan has run for at least a tick, and
// its read loop is handed to a new goroutine. Exactly one of this
// compare-and-swap and the one ending runInline wins, so the loop has one
// owner at a time. It reports whether any connection ran a call inline
// since the last scan or runs one now.
func (s *Server) scanInline() (active bool) {
	s.inlineMu.Lock()
	defer s.inlineMu.Unlock()
	for c := range s.inlineConns {
		v := c.inline.Load()
		if v != c.inlineSeen {
			c.inlineSeen = v
			active = true
			continue
		}
		if v&3 == inlineRunning {
			active = true
			if c.inline.CompareAndSwap(v, v&^3|inlineHanded) {
				go func() { _ = c.serveReads() }()
			}
		}
	}
	return active
}
