package gateway

import (
	"bytes"
	"io"
	"net"
	"sync"
	"time"
)

// connKind is what the first bytes of a connection say it speaks.
type connKind int

const (
	kindUnknown connKind = iota
	kindNative           // Fleet frames
	kindHTTP             // HTTP/1.x request line or the HTTP/2 client preface
	kindTLS              // a TLS handshake record (a ClientHello)
	kindH2C              // the HTTP/2 preface in cleartext, served by grpc-go's transport
)

// sniffLen is the number of bytes read to decide: a Fleet frame's 4-byte
// length prefix and 2-byte magic. Every HTTP/1.x request line and the
// HTTP/2 preface ("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") are longer.
const sniffLen = 6

// httpPrefixes are the first four bytes of the HTTP/2 preface and of the
// request lines of the methods of RFC 9110 section 9 (and PATCH, RFC 5789).
var httpPrefixes = [][]byte{
	[]byte("PRI "), []byte("GET "), []byte("POST"), []byte("PUT "), []byte("HEAD"),
	[]byte("DELE"), []byte("OPTI"), []byte("PATC"), []byte("CONN"), []byte("TRAC"),
}

// classify decides a connection's protocol from its first sniffLen bytes.
func classify(b []byte) connKind {
	if len(b) < sniffLen {
		return kindUnknown
	}
	if b[4] == 0xF1 && b[5] == 0xEE {
		return kindNative
	}
	// A TLS record of type handshake (22), version 3.x (RFC 8446 5.1).
	if b[0] == 0x16 && b[1] == 0x03 {
		return kindTLS
	}
	for _, p := range httpPrefixes {
		if bytes.HasPrefix(b, p) {
			return kindHTTP
		}
	}
	return kindUnknown
}

// sniff reads the first sniffLen bytes of nc within timeout (0: no
// timeout) and returns the connection's kind and a net.Conn that replays
// them before reading from nc.
func sniff(nc net.Conn, timeout time.Duration) (connKind, net.Conn, error) {
	if timeout > 0 {
		_ = nc.SetReadDeadline(time.Now().Add(timeout))
	}
	pc := &prefixConn{Conn: nc}
	if _, err := io.ReadFull(nc, pc.buf[:]); err != nil {
		return kindUnknown, nil, err
	}
	if timeout > 0 {
		_ = nc.SetReadDeadline(time.Time{})
	}
	return classify(pc.buf[:]), pc, nil
}

// prefixConn is a net.Conn whose first reads return the sniffed bytes.
// Once they are consumed, Read is the underlying connection's Read.
type prefixConn struct {
	net.Conn
	buf [sniffLen]byte
	off int
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if c.off < sniffLen {
		n := copy(p, c.buf[c.off:])
		c.off += n
		return n, nil
	}
	return c.Conn.Read(p)
}

// chanListener is a net.Listener fed by deliver: the HTTP server accepts
// the connections the sniffer classified as HTTP.
type chanListener struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newChanListener() *chanListener {
	return &chanListener{ch: make(chan net.Conn), done: make(chan struct{})}
}

// deliver hands c to Accept; false when the listener is closed.
func (l *chanListener) deliver(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "gateway" }
func (pipeAddr) String() string  { return "gateway" }
