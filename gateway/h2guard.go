package gateway

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"golang.org/x/net/http2"
)

// errTooManyResets is the read error an h2Guard returns once a client
// reset more streams than the cap allows; grpc-go then closes the
// transport.
var errTooManyResets = errors.New("gateway: too many reset streams (ENHANCE_YOUR_CALM)")

// errHeaderBlock is the read error for a header block over the cap.
var errHeaderBlock = errors.New("gateway: header block too large")

// http2Preface is the client connection preface, RFC 9113 section 3.4.
const http2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// h2Guard wraps an HTTP/2 connection accepted by Serve, in cleartext or
// decrypted (served by grpc-go's own transport, which has no reset-stream
// cap and no read deadline, or by net/http) and
// watches the frames on it without buffering or copying them: it reads
// only the 9-byte frame headers as the bytes pass (RFC 9113 section 4.1).
//
//   - Reset streams: RST_STREAM frames from the client spend tokens of a
//     bucket refilled at maxResets per second, holding at most 10 times
//     that; a reset that finds it empty ends the connection with GOAWAY
//     (ENHANCE_YOUR_CALM, debug data "too_many_resets"). This is the
//     rapid-reset (CVE-2023-44487) mitigation on top of grpc-go's, which
//     bounds the handlers running at once (MaxConcurrentStreams) but not
//     the rate of streams.
//   - Frame-read timeout: while a frame is partly read, or a header block
//     (HEADERS without END_HEADERS, then CONTINUATION) is open, each read
//     must return within frameTimeout, else the connection is closed. A
//     connection idle between frames is not affected.
//   - Header blocks: one whose encoded bytes exceed maxHeader plus 64 KiB
//     closes the connection (grpc-go's framer limits the decoded list to
//     maxHeader; this bounds what is read while it decodes).
//
// Writes pass through; the guard tracks the server's frame boundaries so
// that a GOAWAY it injects never splits one of grpc-go's frames. When the
// cap is hit in the middle of a server frame, the connection is closed
// without GOAWAY.
type h2Guard struct {
	net.Conn
	maxResets    int
	frameTimeout time.Duration
	maxBlock     int64

	// Read side, used only by the one reading goroutine.
	preface    int                // preface bytes still to skip
	in         frameTrack         // the client's frames
	onFrameFn  func([]byte) error // g.onFrame, made once (a method value per Read would allocate)
	inBlock    bool               // a header block is open
	block      int64              // encoded bytes of the open header block
	lastStream uint32             // highest client stream ID seen
	resetAt    time.Time          // when tokens was last refilled
	tokens     float64            // resets the client may still send at once
	deadline   bool               // a read deadline is set
	readErr    error

	wmu      sync.Mutex // serializes writes and the injected GOAWAY
	out      frameTrack
	closed   bool
	draining bool // a GOAWAY was sent; a goroutine drains and closes
}

// frameTrack follows frame boundaries in a byte stream.
type frameTrack struct {
	hdr    [9]byte
	hn     int
	remain uint32
}

func (t *frameTrack) boundary() bool { return t.hn == 0 && t.remain == 0 }

// feed advances the tracker over b, calling fn with each complete frame
// header (fn may be nil).
func (t *frameTrack) feed(b []byte, fn func(h []byte) error) error {
	for len(b) > 0 {
		if t.remain > 0 {
			n := min(uint32(len(b)), t.remain)
			t.remain -= n
			b = b[n:]
			continue
		}
		n := copy(t.hdr[t.hn:], b)
		t.hn += n
		b = b[n:]
		if t.hn < 9 {
			return nil
		}
		t.hn = 0
		t.remain = uint32(t.hdr[0])<<16 | uint32(t.hdr[1])<<8 | uint32(t.hdr[2])
		if fn != nil {
			if err := fn(t.hdr[:]); err != nil {
				return err
			}
		}
	}
	return nil
}

func newH2Guard(c net.Conn, maxResets int, frameTimeout time.Duration, maxHeader int) *h2Guard {
	g := &h2Guard{
		Conn: c, maxResets: maxResets, frameTimeout: frameTimeout,
		maxBlock: int64(maxHeader) + 64<<10, preface: len(http2Preface),
	}
	g.onFrameFn = g.onFrame
	return g
}

// takeReset spends one token of the reset bucket (rate maxResets per
// second, burst 10 times that, full at the start), reporting false when
// it is empty.
func (g *h2Guard) takeReset(now time.Time) bool {
	burst := float64(g.maxResets) * 10
	if g.resetAt.IsZero() {
		g.tokens = burst
	} else {
		g.tokens = min(burst, g.tokens+now.Sub(g.resetAt).Seconds()*float64(g.maxResets))
	}
	g.resetAt = now
	if g.tokens < 1 {
		return false
	}
	g.tokens--
	return true
}

// midFrame reports whether the client is in the middle of a frame or a
// header block.
func (g *h2Guard) midFrame() bool {
	return g.preface > 0 || !g.in.boundary() || g.inBlock
}

func (g *h2Guard) Read(p []byte) (int, error) {
	if g.readErr != nil {
		return 0, g.readErr
	}
	if g.frameTimeout > 0 {
		if g.midFrame() {
			_ = g.Conn.SetReadDeadline(time.Now().Add(g.frameTimeout))
			g.deadline = true
		} else if g.deadline {
			_ = g.Conn.SetReadDeadline(time.Time{})
			g.deadline = false
		}
	}
	n, err := g.Conn.Read(p)
	b := p[:n]
	if g.preface > 0 {
		k := min(g.preface, len(b))
		g.preface -= k
		b = b[k:]
	}
	ferr := g.in.feed(b, g.onFrameFn)
	if ferr != nil {
		g.readErr = ferr
		// Hand grpc-go what was read; its next Read gets the error.
		return n, err
	}
	return n, err
}

// onFrame sees each client frame header.
func (g *h2Guard) onFrame(h []byte) error {
	length := int64(h[0])<<16 | int64(h[1])<<8 | int64(h[2])
	typ, flags := http2.FrameType(h[3]), http2.Flags(h[4])
	stream := binary.BigEndian.Uint32(h[5:9]) & (1<<31 - 1)
	switch typ {
	case http2.FrameHeaders:
		if stream > g.lastStream {
			g.lastStream = stream
		}
		g.inBlock, g.block = flags&http2.FlagHeadersEndHeaders == 0, length
	case http2.FrameContinuation:
		g.block += length
		if flags&http2.FlagContinuationEndHeaders != 0 {
			g.inBlock = false
		}
	case http2.FrameRSTStream:
		if g.maxResets > 0 && !g.takeReset(time.Now()) {
			g.goAway(http2.ErrCodeEnhanceYourCalm, "too_many_resets")
			return errTooManyResets
		}
	}
	if g.inBlock && g.block > g.maxBlock {
		g.goAway(http2.ErrCodeEnhanceYourCalm, "header_block_too_large")
		return errHeaderBlock
	}
	return nil
}

// goAway writes GOAWAY (when the server is between frames) and closes the
// connection: at once without GOAWAY, else after a half-close and up to a
// second (and 1 MiB) of reading and discarding what the client still
// sends, so that the kernel does not answer unread bytes with a TCP reset
// that would destroy the GOAWAY before the client reads it.
func (g *h2Guard) goAway(code http2.ErrCode, debug string) {
	g.wmu.Lock()
	defer g.wmu.Unlock()
	if g.closed {
		return
	}
	g.closed = true
	if !g.out.boundary() {
		_ = g.Conn.Close()
		return
	}
	var buf bytes.Buffer
	_ = http2.NewFramer(&buf, nil).WriteGoAway(g.lastStream, code, []byte(debug))
	_ = g.Conn.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = g.Conn.Write(buf.Bytes())
	g.draining = true
	if cw, ok := unwrapConn(g.Conn).(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	c := g.Conn
	go func() {
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		_, _ = io.CopyN(io.Discard, c, 1<<20)
		_ = c.Close()
	}()
}

// unwrapConn returns the connection under the gateway's sniffing wrapper.
func unwrapConn(c net.Conn) net.Conn {
	if rc, ok := c.(*h2cReplay); ok {
		c = rc.Conn
	}
	if pc, ok := c.(*prefixConn); ok {
		return pc.Conn
	}
	return c
}

// Close closes the connection, unless a GOAWAY is being delivered (the
// drain closes it then).
func (g *h2Guard) Close() error {
	g.wmu.Lock()
	draining := g.draining
	g.closed = true
	g.wmu.Unlock()
	if draining {
		return nil
	}
	return g.Conn.Close()
}

func (g *h2Guard) Write(p []byte) (int, error) {
	g.wmu.Lock()
	defer g.wmu.Unlock()
	if g.closed {
		return 0, net.ErrClosed
	}
	n, err := g.Conn.Write(p)
	_ = g.out.feed(p[:n], nil)
	return n, err
}
