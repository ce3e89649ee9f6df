package client

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/internal/bufpool"
	"github.com/fleetrpc/fleet/internal/flow"
	"github.com/fleetrpc/fleet/protocol"
)

// clientExt is a client's state for protocol revision 2: the capability
// exchange, the server's go-away, and open streams.
type clientExt struct {
	caps      atomic.Uint32 // capabilities both sides announced; 0 until the hello is answered
	hello     protocol.Hello
	helloDone chan struct{} // closed when the first pong arrives or the client stops
	helloOnce sync.Once

	// Connection flow control, set when both Hellos carry
	// SettingConnWindow (nil otherwise): connCredit is the send credit
	// the server granted, connWin the window the client grants. Written
	// by the read loop before helloDone is closed; connWin is used by the
	// read loop only, connCredit by streams (opened after helloDone).
	connCredit *flow.ConnCredit
	connWin    *flow.ConnWindow

	goAway atomic.Pointer[protocol.GoAway] // the server's go-away, once received

	mu      sync.Mutex
	streams map[uint64]*clientStream
	open    atomic.Int32 // len(streams), stored under mu; read without it
}

// clientCaps is what this client announces.
const clientCaps = protocol.CapCancel | protocol.CapStreams

// startHello queues the client's Hello ping: the first frame on the
// connection. A revision 1 server answers it with a plain pong.
func (c *Client) startHello() {
	c.ext.helloDone = make(chan struct{})
	settings := map[uint64]uint64{protocol.SettingStreamWindow: uint64(c.opts.streamWindow())}
	if w := c.opts.connWindow(); w > 0 {
		settings[protocol.SettingConnWindow] = uint64(w)
	}
	p := protocol.AppendHello(make([]byte, 0, 32), &protocol.Hello{
		Revision: protocol.Revision, Capabilities: clientCaps, Settings: settings,
	})
	if err := c.w.Write(protocol.AppendControl(nil, protocol.TypePing, protocol.FlagHello, 0, p)); err != nil {
		c.helloFinished()
	}
}

// onPong handles a pong: the first one answers the Hello.
func (c *Client) onPong(f protocol.Frame, buf *[]byte) {
	select {
	case <-c.ext.helloDone:
		bufpool.Put(buf)
		return
	default:
	}
	if f.Flags&protocol.FlagHello != 0 {
		if h, err := protocol.ParseHello(f.Payload); err == nil {
			c.ext.hello = h // written before helloDone is closed, read after
			c.ext.caps.Store(h.Capabilities & clientCaps)
			// Connection flow control when both sides announced a window.
			if own, peer := c.opts.connWindow(), h.Setting(protocol.SettingConnWindow, 0, protocol.MaxWindow); own > 0 && peer > 0 && h.Capabilities&protocol.CapStreams != 0 {
				c.ext.connCredit = flow.NewConnCredit(int64(peer))
				c.ext.connWin = flow.NewConnWindow(int64(own))
			}
		}
	}
	bufpool.Put(buf)
	c.helloFinished()
}

func (c *Client) helloFinished() {
	c.ext.helloOnce.Do(func() { close(c.ext.helloDone) })
}

// Capabilities returns the protocol capabilities (protocol.Cap...) both
// this client and its server announced: 0 with a revision 1 server, and
// also until the server has answered the client's Hello (one round trip
// after Dial).
func (c *Client) Capabilities() uint32 { return c.ext.caps.Load() }

// GoAway returns the server's go-away (reason, last sequence id it
// accepted, message), or nil when none has arrived. A revision 1 server
// sends an empty go-away: HasLastSeq is then false.
func (c *Client) GoAway() *protocol.GoAway { return c.ext.goAway.Load() }

// onGoAway records the server's go-away.
func (c *Client) onGoAway(f *protocol.Frame) {
	g, err := protocol.ParseGoAway(f.Payload)
	if err != nil {
		g = protocol.GoAway{}
	}
	c.ext.goAway.CompareAndSwap(nil, &g)
}

// withGoAwayReason adds the reason of the server's go-away, if it sent one
// for a protocol error or the idle timeout, to the error that ended the
// connection.
func (c *Client) withGoAwayReason(err error) error {
	g := c.ext.goAway.Load()
	if g == nil {
		return err
	}
	var why string
	switch g.Reason {
	case protocol.GoAwayProtocolError:
		why = "protocol error"
	case protocol.GoAwayIdle:
		why = "idle timeout"
	default:
		return err
	}
	return fleet.Errorf(fleet.Unavailable, "%v (server closed the connection: %s: %s): %w", err, why, g.Message, err)
}

// sendCancel tells the server that the caller gave up on the call or
// stream seq, when the server understands cancel frames; otherwise the
// server's handler runs on until its deadline, as with revision 1.
func (c *Client) sendCancel(seq uint64) {
	if c.ext.caps.Load()&protocol.CapCancel == 0 {
		return
	}
	var b [protocol.HeaderSize + 3]byte
	_ = c.w.Write(protocol.AppendControl(b[:0], protocol.TypeCancel, 0, seq, nil))
}

// cancelIfNotExpired sends a cancel frame for call seq whose context ctx
// ended, unless it ended by its deadline: the server holds the same
// deadline and ends the handler with DeadlineExceeded by itself, which a
// cancel frame arriving first would turn into Canceled.
func (c *Client) cancelIfNotExpired(ctx context.Context, seq uint64) {
	if ctx.Err() == context.DeadlineExceeded {
		return
	}
	c.sendCancel(seq)
}

// onExtension handles frames the revision 1 read loop did not know;
// unknown types are ignored.
func (c *Client) onExtension(f protocol.Frame, buf *[]byte) {
	switch f.Type {
	case protocol.TypeStreamData, protocol.TypeStreamEnd, protocol.TypeWindowUpdate:
		c.onStreamFrame(f, buf)
	default:
		bufpool.Put(buf)
	}
}
