package server

import (
	"time"

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
