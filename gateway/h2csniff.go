package gateway

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Cleartext HTTP/2 (h2c with prior knowledge) carries gRPC, which
// grpc-go's own transport serves fastest, and Connect, gRPC-Web and
// HTTP/JSON, which only net/http's HTTP/2 server hands to the gateway
// (grpc-go answers them 415). Without WithH2CToHTTP the gateway picks per
// connection, by its first request: it reads the client's preface and
// frames up to the first complete header block (RFC 9113 sections 3.4,
// 4.1, 6.2, 6.10), decodes that block with x/net's HPACK decoder, and
// hands the connection, the bytes read replayed first, to grpc-go when
// the request's content-type is gRPC with protobuf (application/grpc,
// application/grpc+proto, with or without parameters) and to net/http
// otherwise. Later requests on the connection go where the first went.
//
// gRPC clients such as grpc-go's wait for the server's SETTINGS before
// their first request, so the gateway sends an empty SETTINGS frame (a
// valid first server frame, section 3.4) when it has read the preface;
// the server that takes the connection sends its own SETTINGS next (any
// endpoint may send SETTINGS at any time, section 6.5). The client's
// acknowledgement of the empty frame is removed from what that server
// reads, since net/http's server treats an acknowledgement of settings it
// did not send as a protocol error.

// h2cSniffWait bounds the wait for the first request of a cleartext
// HTTP/2 connection: a connection that has sent no complete header block
// by then (an idle gRPC channel) goes to grpc-go's transport, with what
// it sent so far.
const h2cSniffWait = time.Second

// h2cSniffMax bounds the bytes of frames other than a header block read
// before the first request (SETTINGS, WINDOW_UPDATE, PING, PRIORITY);
// past it the connection goes to grpc-go's transport.
const h2cSniffMax = 64 << 10

// h2DefaultMaxFrame is SETTINGS_MAX_FRAME_SIZE's initial value, the
// largest frame a client may send before the server raises it.
const h2DefaultMaxFrame = 16384

var errH2CSniff = errors.New("gateway: bad HTTP/2 connection start")

// sniffH2C reads the start of a cleartext HTTP/2 connection (pc, not yet
// read past the 6 bytes sniff consumed and replays) and reports whether
// its first request goes to net/http (true) or grpc-go (false), with the
// connection to serve it on. An error (a malformed preface or frame, a
// header block over the cap, a frame stalled past the frame-read timeout)
// means the connection is to be closed.
func (g *Gateway) sniffH2C(pc net.Conn) (bool, net.Conn, error) {
	l := g.opts.limits
	frameTimeout := l.frameTimeout
	if frameTimeout <= 0 {
		frameTimeout = h2cSniffWait
	}
	maxBlock := g.opts.maxHeaderBytes + 64<<10
	defer pc.SetReadDeadline(time.Time{})

	var rec bytes.Buffer // what the client sent, replayed to the server
	rec.Grow(len(http2Preface) + 512)
	_ = pc.SetReadDeadline(time.Now().Add(frameTimeout))
	pre := rec.AvailableBuffer()[:len(http2Preface)]
	if _, err := io.ReadFull(pc, pre); err != nil {
		return false, nil, err
	}
	if string(pre) != http2Preface {
		return false, nil, errH2CSniff
	}
	rec.Write(pre)
	_ = pc.SetWriteDeadline(time.Now().Add(frameTimeout))
	if _, err := pc.Write([]byte{0, 0, 0, byte(http2.FrameSettings), 0, 0, 0, 0, 0}); err != nil {
		return false, nil, err
	}
	_ = pc.SetWriteDeadline(time.Time{})

	wait := time.Now().Add(h2cSniffWait)
	// grpc-go ignores a SETTINGS ACK it did not ask for (its
	// handleSettings), so its connections need no filter.
	toGRPC := func() (bool, net.Conn, error) {
		return false, &h2cReplay{Conn: pc, buf: rec.Bytes()}, nil
	}
	// The first header block is decoded as its fragments arrive (the
	// decoder keeps only a field cut between two fragments), so nothing
	// but rec holds the connection's bytes.
	var (
		ctype    string
		sawCT    bool
		decErr   error
		blockLen int
		inBlock  bool
		acked    bool // the client's ACK of the empty SETTINGS was read (and dropped)
		other    int  // bytes of frames before the first header block
		hdr      [9]byte
	)
	dec := hpack.NewDecoder(4096, func(f hpack.HeaderField) {
		if f.Name == "content-type" && !sawCT {
			ctype, sawCT = f.Value, true
		}
	})
	dec.SetMaxStringLength(g.opts.maxHeaderBytes)
	decode := func(frag []byte) {
		blockLen += len(frag)
		if decErr == nil {
			_, decErr = dec.Write(frag)
		}
	}
	for {
		if inBlock {
			_ = pc.SetReadDeadline(time.Now().Add(frameTimeout))
		} else {
			_ = pc.SetReadDeadline(wait)
		}
		n, err := io.ReadFull(pc, hdr[:])
		if err != nil {
			var ne net.Error
			if n == 0 && !inBlock && errors.As(err, &ne) && ne.Timeout() {
				return toGRPC()
			}
			return false, nil, err
		}
		length := uint32(hdr[0])<<16 | uint32(hdr[1])<<8 | uint32(hdr[2])
		typ, flags := http2.FrameType(hdr[3]), http2.Flags(hdr[4])
		if length > h2DefaultMaxFrame {
			return false, nil, fmt.Errorf("%w: frame of %d bytes", errH2CSniff, length)
		}
		_ = pc.SetReadDeadline(time.Now().Add(frameTimeout))
		start := rec.Len()
		rec.Grow(len(hdr) + int(length))
		rec.Write(hdr[:])
		payload := rec.AvailableBuffer()[:length]
		if _, err := io.ReadFull(pc, payload); err != nil {
			return false, nil, err
		}
		rec.Write(payload)
		switch {
		case typ == http2.FrameSettings && flags.Has(http2.FlagSettingsAck) && length == 0 && !acked:
			acked = true
			rec.Truncate(start)
			continue
		case typ == http2.FrameHeaders && !inBlock:
			frag, err := headersFragment(payload, flags)
			if err != nil {
				return false, nil, err
			}
			decode(frag)
			inBlock = !flags.Has(http2.FlagHeadersEndHeaders)
		case typ == http2.FrameContinuation && inBlock:
			decode(payload)
			inBlock = !flags.Has(http2.FlagContinuationEndHeaders)
		case inBlock || typ == http2.FrameContinuation:
			return false, nil, fmt.Errorf("%w: frame type %v inside a header block", errH2CSniff, typ)
		default:
			other += len(hdr) + int(length)
			if other > h2cSniffMax {
				return toGRPC()
			}
			continue
		}
		// The route is known once the content type has been decoded,
		// which clients send at the start of the block: the rest of the
		// block goes to the server chosen, whose own limits hold it.
		if sawCT && decErr == nil {
			if isGRPCProto(ctype) {
				return toGRPC()
			}
			return true, &h2cReplay{Conn: pc, buf: rec.Bytes(), dropAck: !acked}, nil
		}
		if blockLen > maxBlock {
			return false, nil, fmt.Errorf("%w: header block over %d bytes", errH2CSniff, maxBlock)
		}
		if inBlock {
			continue
		}
		if decErr == nil {
			decErr = dec.Close()
		}
		// A block that does not decode goes to grpc-go, which answers it
		// as before; a request without a content type goes to net/http.
		if decErr != nil {
			return toGRPC()
		}
		return true, &h2cReplay{Conn: pc, buf: rec.Bytes(), dropAck: !acked}, nil
	}
}

// headersFragment is the header block fragment of a HEADERS frame's
// payload: without its padding and priority fields (RFC 9113 6.2).
func headersFragment(p []byte, flags http2.Flags) ([]byte, error) {
	if flags.Has(http2.FlagHeadersPadded) {
		if len(p) < 1 || int(p[0]) > len(p)-1 {
			return nil, fmt.Errorf("%w: bad HEADERS padding", errH2CSniff)
		}
		p = p[1 : len(p)-int(p[0])]
	}
	if flags.Has(http2.FlagHeadersPriority) {
		if len(p) < 5 {
			return nil, fmt.Errorf("%w: short HEADERS priority", errH2CSniff)
		}
		p = p[5:]
	}
	return p, nil
}

// isGRPCProto reports whether ct is gRPC's content type with the
// protobuf codec (application/grpc or application/grpc+proto, parameters
// allowed), which grpc-go's transport serves.
func isGRPCProto(ct string) bool {
	ct, _, _ = strings.Cut(strings.ToLower(ct), ";")
	ct = strings.TrimSpace(ct)
	return ct == "application/grpc" || ct == "application/grpc+proto"
}

// h2cReplay is a sniffed cleartext HTTP/2 connection: reads return the
// bytes sniffH2C read first, then the connection's; with dropAck, the
// first SETTINGS frame with ACK (the client's acknowledgement of the
// gateway's empty SETTINGS) is left out of what follows. Used by the one
// goroutine of the HTTP/2 server reading it.
type h2cReplay struct {
	net.Conn
	buf     []byte
	dropAck bool
	hdr     [9]byte
	pend    []byte // frame header bytes still to return
	remain  uint32 // payload bytes of the current frame still to pass
}

func (c *h2cReplay) Read(p []byte) (int, error) {
	for {
		switch {
		case len(c.buf) > 0:
			n := copy(p, c.buf)
			c.buf = c.buf[n:]
			return n, nil
		case len(c.pend) > 0:
			n := copy(p, c.pend)
			c.pend = c.pend[n:]
			return n, nil
		case c.remain > 0:
			n, err := c.Conn.Read(p[:min(uint32(len(p)), c.remain)])
			c.remain -= uint32(n)
			return n, err
		case !c.dropAck:
			return c.Conn.Read(p)
		}
		if _, err := io.ReadFull(c.Conn, c.hdr[:]); err != nil {
			return 0, err
		}
		length := binary.BigEndian.Uint32(c.hdr[:4]) >> 8
		if http2.FrameType(c.hdr[3]) == http2.FrameSettings && http2.Flags(c.hdr[4]).Has(http2.FlagSettingsAck) && length == 0 {
			c.dropAck = false
			continue
		}
		c.pend, c.remain = c.hdr[:], length
	}
}
