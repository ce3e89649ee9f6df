package client

import (
	"context"
	"errors"
	"os"
	"time"
)

// A serial caller (one call in flight on the connection, no stream open)
// reads its response off the connection itself instead of waiting for the
// read loop to read it and wake it: the wake of a parked goroutine by a
// running one makes the runtime start a second thread that finds nothing
// to do, which cost a serial call on a 2-core machine about a futex wake,
// two context switches and a nanosleep. Exactly one goroutine reads the
// connection at a time; rstate says which:
//
//   - readerLoop: the read loop reads (the state while calls overlap,
//     streams are open, or the connection is idle).
//   - readerIdle: nobody reads. The read loop parks in this state after
//     it delivered the response of a sync call that left no call pending;
//     the next call that starts alone takes the reader, any other call or
//     stream hands it back to the read loop, and the read loop takes it
//     back by itself when no call took it for readerLend (so go-away,
//     pings and a closed connection are noticed on an idle connection as
//     before, at most 2*readerLend later).
//   - readerCaller: the caller of a lone sync call reads, dispatching
//     every frame it meets (go-away, pings, cancels, stream frames, the
//     responses of calls that started meanwhile) as the read loop would,
//     until its own response arrives, its context ends (its read is then
//     interrupted by a read deadline in the past), the connection fails,
//     or a frame is not yet whole in the read buffer (so that an
//     interrupted read never leaves half a frame consumed). It then
//     leaves the reader idle when nothing else is pending and hands it
//     back to the read loop otherwise.
type readerState uint8

const (
	readerLoop readerState = iota
	readerIdle
	readerCaller
)

// readerLend is how long the read loop leaves an idle connection unread
// for the next serial call to read itself: the read loop checks this
// often while serial calls take the reader, and takes it back at the
// first check that finds no call took it since the one before (so after
// readerLend to 2*readerLend). 5 ms: with 1 ms the checks cost a serial
// caller 0.1 futex calls per call, with 5 ms 0.03.
const readerLend = 5 * time.Millisecond

// aLongTimeAgo is a read deadline that has passed.
var aLongTimeAgo = time.Unix(1, 0)

// lendReader, called under mu by the read loop after it took the last
// pending call (a sync one) off the table, leaves the reader idle for the
// caller's next call when nothing else needs reading, and reports whether
// it did (the read loop then waits in readerTurn).
func (c *Client) lendReader() bool {
	if c.selfRead && c.err == nil && c.r.Buffered() == 0 && !c.hasStreams() {
		c.rstate = readerIdle
		return true
	}
	return false
}

// takeReader, called under mu by send once call is pending, gives the
// reader of an idle connection to call when it is the connection's only
// call and a sync one, and back to the read loop otherwise.
func (c *Client) takeReader(call *Call, alone bool) {
	if c.rstate != readerIdle {
		return
	}
	if alone && call.sync {
		c.rstate = readerCaller
		c.rgen++
		call.reads = true
		return
	}
	c.resumeLoop()
}

// wakeReader hands the reader of an idle connection back to the read
// loop (a stream opened).
func (c *Client) wakeReader() {
	c.mu.Lock()
	if c.rstate == readerIdle {
		c.resumeLoop()
	}
	c.mu.Unlock()
}

// resumeLoop, under mu, gives reading back to the read loop.
func (c *Client) resumeLoop() {
	c.rstate = readerLoop
	select {
	case c.resume <- struct{}{}:
	default:
	}
}

// releaseReader ends a caller's turn at reading: the reader stays idle
// when nothing is pending, otherwise it goes back to the read loop.
func (c *Client) releaseReader() {
	c.mu.Lock()
	if c.err == nil && len(c.pending) == 0 && c.r.Buffered() == 0 && !c.hasStreams() {
		c.rstate = readerIdle
	} else {
		c.resumeLoop()
	}
	c.mu.Unlock()
}

// hasStreams reports whether a stream is open, without taking the
// streams' lock (it runs on every serial call).
func (c *Client) hasStreams() bool { return c.ext.open.Load() > 0 }

// readerTurn waits, in the read loop after it lent the reader, until
// reading is the read loop's again: at once in readerLoop; otherwise when
// a caller hands it back, or when the reader stayed idle for readerLend
// with no caller taking it, or the client stopped while the reader was
// idle (the read then fails and the loop ends).
func (c *Client) readerTurn() {
	c.mu.Lock()
	if c.rstate == readerLoop {
		select { // a hand-back the loop did not need to wait for
		case <-c.resume:
		default:
		}
		c.mu.Unlock()
		return
	}
	gen := c.rgen
	c.mu.Unlock()
	t := time.NewTimer(readerLend)
	defer t.Stop()
	done := c.done
	for {
		select {
		case <-c.resume:
			return
		case <-t.C:
		case <-done:
			done = nil
		}
		c.mu.Lock()
		switch {
		case c.rstate == readerLoop:
			select {
			case <-c.resume:
			default:
			}
			c.mu.Unlock()
			return
		case c.rstate == readerIdle && (c.rgen == gen || done == nil):
			c.rstate = readerLoop
			c.mu.Unlock()
			return
		}
		gen = c.rgen
		c.mu.Unlock()
		if done != nil {
			t.Reset(readerLend)
		}
	}
}

// readOwn reads frames, for a sync call holding the reader, until the
// call's own response arrives, and reports whether it did (the call is
// then complete and its wake consumed). Otherwise the reader is back with
// the read loop (or the connection failed) and the caller waits as any
// other.
func (c *Client) readOwn(ctx context.Context, call *Call) bool {
	watched := false
	var stop func() bool
	if ctx.Done() != nil {
		call.client = c
		stop = context.AfterFunc(ctx, call.interrupt)
		watched = true
	}
	got := false
	for !got {
		whole, err := c.r.Await()
		if err == nil && !whole {
			break // the read loop reads what trickles in
		}
		if err == nil {
			f, buf, rerr := c.r.ReadFrame()
			if err = rerr; err == nil {
				c.dispatch(f, buf, false)
				select {
				case <-call.wake:
					got = true
				default:
				}
				continue
			}
		}
		if !watched || !errors.Is(err, os.ErrDeadlineExceeded) {
			c.fail(c.withGoAwayReason(err))
		}
		break
	}
	if watched && !stop() {
		<-call.intrDone
		_ = c.rw.SetReadDeadline(time.Time{})
	}
	call.reads = false
	c.releaseReader()
	return got
}

// interruptRead ends the read of a caller reading for itself whose
// context ended.
func (call *Call) interruptRead() {
	_ = call.client.rw.SetReadDeadline(aLongTimeAgo)
	call.intrDone <- struct{}{}
}
