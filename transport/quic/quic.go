package quic

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/internal/hello"
	"github.com/fleetrpc/fleet/transport"
	quicgo "github.com/quic-go/quic-go"
)

// Network is the name the package registers: "quic".
const Network = "quic"

// ALPN is the TLS application protocol Fleet over QUIC negotiates when
// the TLS configuration names none.
const ALPN = "fleet/1"

// magic is the hello of Fleet over QUIC, version 1.
var magic = hello.Magic{'F', 'L', 'E', 'E', 'T', 'Q', 'U', 1}

// Config holds the QUIC settings. The zero value dials with the system's
// root certificates and cannot listen.
type Config struct {
	// TLS is the TLS configuration (QUIC always uses TLS 1.3). A server
	// needs Certificates (or GetCertificate); a client needs the roots
	// that verify the server (RootCAs, nil: the system's). NextProtos
	// defaults to ALPN. Default nil: a client with the system's roots.
	TLS *tls.Config
	// QUIC is passed to quic-go; nil uses Fleet's defaults: a 30 s idle
	// timeout, a keep-alive every 10 s (so NAT bindings and the idle
	// timeout survive quiet connections), a 10 s handshake idle timeout,
	// and at most one incoming bidirectional stream per connection.
	QUIC *quicgo.Config
	// Linger bounds how long Close waits for the peer to close after
	// the stream's FIN (see the package doc); default 2 s.
	Linger time.Duration
	// HandshakeTimeout bounds accepting the stream and the Fleet hello
	// after the QUIC handshake; default 10 s.
	HandshakeTimeout time.Duration
}

func (c Config) withDefaults() Config {
	if c.TLS == nil {
		c.TLS = &tls.Config{}
	}
	c.TLS = c.TLS.Clone()
	if len(c.TLS.NextProtos) == 0 {
		c.TLS.NextProtos = []string{ALPN}
	}
	if c.QUIC == nil {
		c.QUIC = &quicgo.Config{
			MaxIdleTimeout:        30 * time.Second,
			KeepAlivePeriod:       10 * time.Second,
			HandshakeIdleTimeout:  10 * time.Second,
			MaxIncomingStreams:    1,
			MaxIncomingUniStreams: -1,
		}
	}
	if c.Linger <= 0 {
		c.Linger = 2 * time.Second
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = 10 * time.Second
	}
	return c
}

// Transport is Fleet over QUIC with one Config. Safe for concurrent use.
type Transport struct {
	cfg Config
}

// New returns a Transport with cfg (see Config for the defaults).
func New(cfg Config) *Transport { return &Transport{cfg: cfg.withDefaults()} }

// Register registers New(cfg) as the network "quic", replacing the
// package's default.
func Register(cfg Config) { transport.Register(Network, New(cfg)) }

func init() { Register(Config{}) }

var _ transport.Transport = (*Transport)(nil)

// Listen listens for QUIC connections on the UDP address addr
// ("host:port"). It fails with InvalidArgument when the TLS configuration
// has no certificate, Unavailable when the socket cannot be opened. The
// listener's Close stops accepting but leaves accepted connections open;
// the socket closes after the last of them.
func (t *Transport) Listen(ctx context.Context, addr string) (net.Listener, error) {
	if len(t.cfg.TLS.Certificates) == 0 && t.cfg.TLS.GetCertificate == nil && t.cfg.TLS.GetConfigForClient == nil {
		return nil, fleet.NewError(fleet.InvalidArgument, "quic: listening needs a certificate: register the network with quic.Register(quic.Config{TLS: ...})")
	}
	var lc net.ListenConfig
	pc, err := lc.ListenPacket(ctx, "udp", addr)
	if err != nil {
		return nil, fleet.Errorf(fleet.Unavailable, "quic: listen %s: %v", addr, err)
	}
	tr := &quicgo.Transport{Conn: pc}
	ql, err := tr.Listen(t.cfg.TLS, t.cfg.QUIC)
	if err != nil {
		pc.Close()
		return nil, fleet.Errorf(fleet.Unavailable, "quic: listen %s: %v", addr, err)
	}
	return hello.NewListener(hello.Config[*quicgo.Conn]{
		Magic:  magic,
		Accept: func() (*quicgo.Conn, error) { return ql.Accept(context.Background()) },
		Open: func(ctx context.Context, qc *quicgo.Conn) (net.Conn, error) {
			st, err := qc.AcceptStream(ctx)
			if err != nil {
				return nil, err
			}
			return t.wrap(qc, st), nil
		},
		Abort: func(qc *quicgo.Conn) { _ = qc.CloseWithError(1, "fleet: no hello") },
		Close: ql.Close,
		CloseSocket: func() error {
			_ = tr.Close()
			return pc.Close()
		},
		Addr:    ql.Addr(),
		Timeout: t.cfg.HandshakeTimeout,
	}), nil
}

// Dial connects to the UDP address addr, opens the Fleet stream and runs
// the hello, all within ctx (default HandshakeTimeout). Errors have code
// Unavailable.
func (t *Transport) Dial(ctx context.Context, addr string) (net.Conn, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.cfg.HandshakeTimeout)
		defer cancel()
	}
	tlsCfg := t.cfg.TLS
	if tlsCfg.ServerName == "" {
		if host, _, err := net.SplitHostPort(addr); err == nil {
			tlsCfg = tlsCfg.Clone()
			tlsCfg.ServerName = host
		}
	}
	qc, err := quicgo.DialAddr(ctx, addr, tlsCfg, t.cfg.QUIC)
	if err != nil {
		return nil, fleet.Errorf(fleet.Unavailable, "quic: dial %s: %v", addr, err)
	}
	st, err := qc.OpenStreamSync(ctx)
	if err != nil {
		_ = qc.CloseWithError(1, "fleet: open stream")
		return nil, fleet.Errorf(fleet.Unavailable, "quic: open stream to %s: %v", addr, err)
	}
	c := t.wrap(qc, st)
	if err := hello.Dial(ctx, c, magic); err != nil {
		_ = qc.CloseWithError(1, "fleet: hello")
		return nil, fleet.Errorf(fleet.Unavailable, "quic: no Fleet server answered at %s: %v", addr, err)
	}
	return c, nil
}

func (t *Transport) wrap(qc *quicgo.Conn, st *quicgo.Stream) *streamConn {
	return &streamConn{Stream: st, qc: qc, linger: t.cfg.Linger}
}

// streamConn is a Fleet connection: one QUIC stream of one QUIC
// connection, which it owns.
type streamConn struct {
	*quicgo.Stream
	qc      *quicgo.Conn
	linger  time.Duration
	peerFin atomic.Bool // the peer ended its side of the stream
	once    sync.Once
}

// Read reads from the stream, noting the peer's FIN.
func (c *streamConn) Read(p []byte) (int, error) {
	n, err := c.Stream.Read(p)
	if errors.Is(err, io.EOF) {
		c.peerFin.Store(true)
	}
	return n, err
}

// LocalAddr returns the local UDP address.
func (c *streamConn) LocalAddr() net.Addr { return c.qc.LocalAddr() }

// RemoteAddr returns the peer's UDP address.
func (c *streamConn) RemoteAddr() net.Addr { return c.qc.RemoteAddr() }

// Close ends the stream (FIN) and closes the QUIC connection: at once
// when the peer has ended its side already, else after the peer closes
// the connection or Linger passes, so that what was written reaches the
// peer first.
func (c *streamConn) Close() error {
	c.once.Do(func() {
		_ = c.Stream.Close()
		if !c.peerFin.Load() {
			t := time.NewTimer(c.linger)
			select {
			case <-c.qc.Context().Done():
			case <-t.C:
			}
			t.Stop()
		}
		_ = c.qc.CloseWithError(0, "")
	})
	return nil
}
