package server

import "time"

// conn.inline is one word that the read loop and inlineMonitor share:
// the number of calls the read loop ran inline << 3, inlineReg when the
// connection is in Server.inlineConns, and the state of the last such
// call in the low two bits.
const (
	inlineIdle    = 0 // the read loop reads
	inlineRunning = 1 // the read loop runs a call
	inlineHanded  = 2 // the call ran too long: another goroutine reads
	inlineState   = 3 // mask of the state bits

	inlineReg = 4 // in Server.inlineConns

	inlineRunShift = 3
)

// inlineTick is the period of inlineMonitor. A call runs on its read loop
// for one to two ticks at most before another goroutine takes over the
// reading.
const inlineTick = time.Millisecond

// runInline runs t, a serial caller's call (protocol.FlagSole) that is
// the connection's only one, with no further frame read, on the read loop
// itself. This saves the hand-off to a handler goroutine, which costs a
// wake-up, often of another thread, per call. Calls of a connection with
// many callers never carry the flag: their read loop only reads, and their
// handlers run side by side on handler goroutines.
//
// So that a slow handler does not stop the connection's reading (cancel
// frames, pings, further calls), the server's inlineMonitor starts a new
// goroutine on the read loop when the call still runs one to two
// inlineTicks later. runInline reports whether this goroutine still owns
// the read loop; when not, the caller returns without touching the loop's
// state.
//
// No timer is set per call: resetting one would wake the runtime's network
// poller on an idle processor at every call, a context switch as costly as
// the hand-off saved.
func (c *conn) runInline(t task) bool {
	s := c.s
	c.inlineRuns++
	v := c.inlineRuns<<inlineRunShift | inlineReg | inlineRunning
	// The monitor may drop an idle connection from its set at any time
	// (clearing inlineReg with a compare-and-swap under inlineMu): either
	// this swap wins and the connection stays in the set, or it fails and
	// the connection is put back, under the lock.
	if old := c.inline.Load(); old&inlineReg == 0 || !c.inline.CompareAndSwap(old, v) {
		s.inlineMu.Lock()
		if s.inlineConns == nil {
			s.inlineConns = map[*conn]struct{}{}
		}
		s.inlineConns[c] = struct{}{}
		c.inline.Store(v)
		s.inlineMu.Unlock()
	}
	// After the swap or store above: either this sees the monitor stopped
	// and starts one, or the stopping monitor's last scan sees the run.
	if !s.inlineMon.Load() && s.inlineMon.CompareAndSwap(false, true) {
		go s.inlineMonitor()
	}
	t.run()
	return c.inline.CompareAndSwap(v, v&^inlineState|inlineIdle)
}

// unregisterInline forgets an ended connection that ran calls inline.
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

// scanInline looks at each connection in the set:
//   - a call already seen running at the last scan has run for at least a
//     tick: its read loop is handed to a new goroutine (exactly one of this
//     compare-and-swap and the one ending runInline wins, so the loop has
//     one owner at a time);
//   - a connection that ran no call inline since the last scan leaves the
//     set, so the scan's cost follows the connections with serial callers
//     now, not all those that ever had one.
//
// It reports whether any connection ran a call inline since the last scan
// or runs one now.
func (s *Server) scanInline() (active bool) {
	s.inlineMu.Lock()
	defer s.inlineMu.Unlock()
	for c := range s.inlineConns {
		v := c.inline.Load()
		switch {
		case v != c.inlineSeen:
			c.inlineSeen = v
			active = true
		case v&inlineState == inlineRunning:
			active = true
			if c.inline.CompareAndSwap(v, v&^inlineState|inlineHanded) {
				go c.readOn()
			}
		default: // unchanged and not running
			if c.inline.CompareAndSwap(v, v&^inlineReg) {
				delete(s.inlineConns, c)
			}
		}
	}
	return active
}
