package server

import (
	"time"

	"github.com/fleetrpc/fleet/internal/bufpool"
	"github.com/fleetrpc/fleet/internal/flow"
	"github.com/fleetrpc/fleet/protocol"
)

// This file holds what a connection's read loop does to bound a peer: the
// memory budgets (per connection and server-wide), the wait for a handler
// slot, and the frame-read timeout.

// release returns a finished request's cost to both budgets and wakes the
// read loop, which may be waiting for room or for a slot.
func (c *conn) release(cost int64) {
	c.held.Add(-cost)
	c.s.mem.release(cost)
	select {
	case c.drained <- struct{}{}:
	default:
	}
}

// waitRoom blocks the read loop until a request costing cost bytes fits in
// the connection's budget (WithMaxPendingBytesPerConn) and the server's
// (WithMaxPendingBytes), and counts it in the server's: the frame's
// reservation (c.reading) becomes part of it. A request larger than a
// budget is let through when nothing else is held there, so it runs alone
// rather than never. It reports false when the connection ends first. The
// caller counts cost in c.held.
func (c *conn) waitRoom(cost int64) bool {
	max := c.s.opts.maxHeldBytes
	for {
		h := c.held.Load()
		if h <= 0 || h+cost <= max {
			break
		}
		select {
		case <-c.drained:
		case <-c.ctx.Done():
			return false
		}
	}
	m := &c.s.mem
	if c.reading > 0 {
		if m.tryReserve(cost-c.reading, c.reading) {
			c.reading = 0
			return true
		}
		// Waiting while holding the frame's reservation could deadlock
		// with other connections doing the same: give it back and wait
		// for the whole cost.
		c.dropReading()
	}
	return m.reserve(c.ctx, cost, 0)
}

// tryRoom is waitRoom without the wait: it counts cost in the server's
// budget and reports true when it fits now in both budgets (the caller
// then counts it in c.held), else false, taking nothing. Stream messages
// use it: the read loop must not wait for a stream's handler, which may
// itself wait for a window update still unread.
func (c *conn) tryRoom(cost int64) bool {
	if h := c.held.Load(); h > 0 && h+cost > c.s.opts.maxHeldBytes {
		return false
	}
	m := &c.s.mem
	if c.reading > 0 {
		if !m.tryReserve(cost-c.reading, c.reading) {
			return false
		}
		c.reading = 0
		return true
	}
	return m.tryReserve(cost, 0)
}

// releaseStreamMsg gives back a queued stream message's buffer and the
// bytes it was charged in the budgets (its capacity; see onStreamFrame).
func (c *conn) releaseStreamMsg(m flow.Msg) {
	cost := int64(cap(*m.Buf))
	bufpool.Put(m.Buf)
	c.release(cost)
}

// dropReading returns the server-budget reservation of the frame just
// read, when dispatch did not take it over.
func (c *conn) dropReading() {
	if c.reading != 0 {
		c.s.mem.release(c.reading)
		c.reading = 0
	}
}

// waitSlot blocks the read loop until fewer than max handlers of the
// connection run. It reports false when the connection ends first.
func (c *conn) waitSlot(max int64) bool {
	for c.active.Load() >= max {
		select {
		case <-c.drained:
		case <-c.ctx.Done():
			return false
		}
	}
	return true
}

// decompressRoom returns the most a request's payload may decompress to:
// 0 when it is not compressed, else the compressor's bound from the
// compressed bytes (protocol.DecompressRoom, which measures without
// keeping what the bytes do not bound), within
// Limits.MaxDecompressedSize. The request is refused when that bound
// already breaks the limit or the payload is malformed.
func (c *conn) decompressRoom(f *protocol.Frame) (int, error) {
	return protocol.DecompressRoom(f, c.s.opts.limits.MaxDecompressedSize)
}

// readFrame reads the next frame under two deadlines: the idle timeout
// until its first byte arrives (refreshed lazily, *idleSet is when it was
// last set), then the frame-read timeout (or the idle timeout, when
// shorter) until it is whole. A frame that is already buffered whole costs
// no deadline change; one that is not is first reserved in the server's
// budget at its announced size.
func (c *conn) readFrame(idleSet *time.Time) (protocol.Frame, *[]byte, error) {
	ft := c.s.opts.frameTimeout
	if idle := c.s.opts.idleTimeout; idle > 0 && (ft <= 0 || idle < ft) {
		ft = idle // the idle timeout also bounds one frame, as it always did
	}
	whole, err := c.r.Await()
	if err != nil {
		return protocol.Frame{}, nil, err
	}
	if whole {
		return c.r.ReadFrame()
	}
	if ft > 0 {
		_ = c.nc.SetReadDeadline(time.Now().Add(ft))
		*idleSet = time.Time{} // the idle deadline must be set again
	}
	// The frame is not in memory yet: reserve its size in the server's
	// budget before reading it, so that many connections each sending a
	// large frame cannot go past the budget. The connection is not read
	// while it waits; the frame-read timeout starts again after.
	n, err := c.r.PeekFrameSize()
	if err != nil {
		return protocol.Frame{}, nil, err
	}
	reserve := int64(n)
	if !c.s.mem.tryReserve(reserve, 0) {
		if !c.s.mem.reserve(c.ctx, reserve, 0) {
			return protocol.Frame{}, nil, errClosed
		}
		if ft > 0 {
			_ = c.nc.SetReadDeadline(time.Now().Add(ft))
		}
	}
	// Held until dispatch turns it into the request's cost, or the
	// read loop drops it (dropReading).
	c.reading = reserve
	f, buf, err := c.r.ReadFrame()
	if err != nil {
		c.dropReading()
		return f, buf, err
	}
	if ft > 0 && c.s.opts.idleTimeout <= 0 {
		_ = c.nc.SetReadDeadline(time.Time{})
	}
	return f, buf, nil
}

// authDeadline closes the connection when, with auth configured, no call
// has passed the auth check within the auth timeout. It returns the
// function that stops the timer, or nil when there is none.
func (c *conn) authDeadline() func() bool {
	d := c.s.opts.authTimeout
	if c.s.opts.auth == nil || d <= 0 {
		return nil
	}
	t := time.AfterFunc(d, func() {
		if !c.authed.Load() {
			c.s.opts.logger.Debug("fleet server: closing unauthenticated connection", "remote", c.remote, "after", d)
			c.close(false)
		}
	})
	return t.Stop
}
