package kcp

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/internal/hello"
	"github.com/fleetrpc/fleet/transport"
	kcpgo "github.com/xtaci/kcp-go/v5"
)

// Network is the name the package registers: "kcp".
const Network = "kcp"

// magic is the hello of Fleet over KCP, version 1.
var magic = hello.Magic{'F', 'L', 'E', 'E', 'T', 'K', 'C', 1}

// Config holds the KCP settings. The zero value is a working
// configuration tuned for RPC latency; every field's default is stated.
// Both ends must use the same Key and the same FEC shards.
type Config struct {
	// NoDelay, Interval, Resend and NoCongestion are KCP's ikcp_nodelay
	// settings (https://github.com/skywind3000/kcp). When all four are
	// zero the "fastest" profile applies: no-delay on, a 10 ms internal
	// update interval, fast retransmit after 2 duplicate ACKs, and
	// congestion control off (1, 10, 2, 1). To set them, set all four.
	NoDelay, Interval, Resend, NoCongestion int
	// SendWindow and RecvWindow are the window sizes in packets; default
	// 512 each (KCP's own default is 32, too few for many concurrent
	// calls). Each window can hold up to its size times MTU bytes.
	SendWindow, RecvWindow int
	// MTU is the largest datagram KCP sends, in bytes without the UDP
	// and IP headers; default 1350, which fits common tunnels and VPNs
	// below the 1500-byte Ethernet MTU.
	MTU int
	// DataShards and ParityShards turn on forward error correction
	// (Reed-Solomon, github.com/klauspost/reedsolomon): every DataShards
	// packets are followed by ParityShards parity packets, so that many
	// losses per group are repaired without a retransmission. Default 0
	// and 0: off, as FEC costs bandwidth and CPU on good links; 10 and 3
	// suit a link with a few percent of loss.
	DataShards, ParityShards int
	// Key, when set, encrypts every packet with AES (the key is
	// SHA-256 of Key, so any length works). Default none: packets are
	// not encrypted but carry a CRC32, so corrupt and stray datagrams are
	// dropped before they reach a session. KCP's packet encryption does
	// not authenticate the peer; for that use QUIC or client TLS.
	Key []byte
	// SocketBuffer is the UDP socket's receive and send buffer in bytes,
	// asked of the kernel (which may cap it, see net.core.rmem_max);
	// default 4 MiB.
	SocketBuffer int
	// HandshakeTimeout bounds the Fleet hello after a session opens (see
	// the package doc); default 10 s.
	HandshakeTimeout time.Duration
	// Linger caps how long Close keeps a session alive after the last
	// write so its data can be sent and retransmitted (see Close);
	// default 1 s.
	Linger time.Duration
}

func (c Config) withDefaults() Config {
	if c.NoDelay == 0 && c.Interval == 0 && c.Resend == 0 && c.NoCongestion == 0 {
		c.NoDelay, c.Interval, c.Resend, c.NoCongestion = 1, 10, 2, 1
	}
	if c.SendWindow <= 0 {
		c.SendWindow = 512
	}
	if c.RecvWindow <= 0 {
		c.RecvWindow = 512
	}
	if c.MTU <= 0 {
		c.MTU = 1350
	}
	if c.SocketBuffer <= 0 {
		c.SocketBuffer = 4 << 20
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = 10 * time.Second
	}
	if c.Linger <= 0 {
		c.Linger = time.Second
	}
	return c
}

// block returns the packet cipher: AES with SHA-256(Key), or kcp-go's
// "none" cipher, which adds the CRC32 check without encrypting.
func (c Config) block() (kcpgo.BlockCrypt, error) {
	if len(c.Key) == 0 {
		return kcpgo.NewNoneBlockCrypt(nil)
	}
	k := sha256.Sum256(c.Key)
	return kcpgo.NewAESBlockCrypt(k[:])
}

// Transport is Fleet over KCP with one Config. Safe for concurrent use.
type Transport struct {
	cfg Config
}

// New returns a Transport with cfg (see Config for the defaults).
func New(cfg Config) *Transport { return &Transport{cfg: cfg.withDefaults()} }

// Register registers New(cfg) as the network "kcp", replacing the
// package's default.
func Register(cfg Config) { transport.Register(Network, New(cfg)) }

func init() { Register(Config{}) }

// tune applies the session settings of cfg.
func (t *Transport) tune(s *kcpgo.UDPSession) {
	c := t.cfg
	s.SetNoDelay(c.NoDelay, c.Interval, c.Resend, c.NoCongestion)
	s.SetWindowSize(c.SendWindow, c.RecvWindow)
	s.SetMtu(c.MTU)
	s.SetACKNoDelay(true) // acknowledge at once rather than at the next update
	s.SetWriteDelay(false)
}

// Listen listens for KCP sessions on the UDP address addr ("host:port").
// The listener hands out sessions that completed the Fleet hello; its
// Close stops listening but leaves accepted sessions open. Errors have
// code Unavailable.
func (t *Transport) Listen(ctx context.Context, addr string) (net.Listener, error) {
	block, err := t.cfg.block()
	if err != nil {
		return nil, fleet.Errorf(fleet.InvalidArgument, "kcp: cipher: %v", err)
	}
	// The listener's sessions share its socket, and kcp-go closes the
	// socket with a listener it opened; so Fleet opens the socket and
	// closes it after the last session, letting a graceful shutdown
	// close the listener first and its connections later.
	var lc net.ListenConfig
	pc, err := lc.ListenPacket(ctx, "udp", addr)
	if err != nil {
		return nil, fleet.Errorf(fleet.Unavailable, "kcp: listen %s: %v", addr, err)
	}
	if uc, ok := pc.(*net.UDPConn); ok {
		_ = uc.SetReadBuffer(t.cfg.SocketBuffer)
		_ = uc.SetWriteBuffer(t.cfg.SocketBuffer)
	}
	l, err := kcpgo.ServeConn(block, t.cfg.DataShards, t.cfg.ParityShards, pc)
	if err != nil {
		pc.Close()
		return nil, fleet.Errorf(fleet.Unavailable, "kcp: listen %s: %v", addr, err)
	}
	return hello.NewListener(hello.Config[*conn]{
		Magic: magic,
		Accept: func() (*conn, error) {
			s, err := l.AcceptKCP()
			if err != nil {
				return nil, err
			}
			t.tune(s)
			return t.wrap(s), nil
		},
		Abort:       func(c *conn) { c.Close() },
		Close:       l.Close,
		CloseSocket: pc.Close,
		Addr:        l.Addr(),
		Timeout:     t.cfg.HandshakeTimeout,
	}), nil
}

// Dial opens a KCP session to the UDP address addr and runs the Fleet
// hello within ctx, so it fails (code Unavailable) when no Fleet server
// answers there.
func (t *Transport) Dial(ctx context.Context, addr string) (net.Conn, error) {
	block, err := t.cfg.block()
	if err != nil {
		return nil, fleet.Errorf(fleet.InvalidArgument, "kcp: cipher: %v", err)
	}
	s, err := kcpgo.DialWithOptions(addr, block, t.cfg.DataShards, t.cfg.ParityShards)
	if err != nil {
		return nil, fleet.Errorf(fleet.Unavailable, "kcp: dial %s: %v", addr, err)
	}
	t.tune(s)
	_ = s.SetReadBuffer(t.cfg.SocketBuffer)
	_ = s.SetWriteBuffer(t.cfg.SocketBuffer)
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.cfg.HandshakeTimeout)
		defer cancel()
	}
	if err := hello.Dial(ctx, s, magic); err != nil {
		s.Close()
		return nil, fleet.Errorf(fleet.Unavailable, "kcp: no Fleet server answered at %s: %v", addr, err)
	}
	return t.wrap(s), nil
}

func (t *Transport) wrap(s *kcpgo.UDPSession) *conn {
	return &conn{UDPSession: s, linger: t.cfg.Linger}
}

// conn is a Fleet connection over one KCP session.
type conn struct {
	*kcpgo.UDPSession
	linger    time.Duration
	lastWrite atomic.Int64 // unix nanoseconds
	once      sync.Once
}

// Write writes to the session, noting the time.
func (c *conn) Write(p []byte) (int, error) {
	c.lastWrite.Store(time.Now().UnixNano())
	return c.UDPSession.Write(p)
}

// Close closes the session. KCP has no close handshake and kcp-go drops
// what it has not yet sent when a session closes, so when the last write
// was recent Close first keeps the session running for four
// retransmission timeouts after it (capped by Config.Linger), time for
// the data to be sent and, on a lossy link, retransmitted.
func (c *conn) Close() error {
	err := net.ErrClosed
	c.once.Do(func() {
		if last := c.lastWrite.Load(); last != 0 {
			rto := time.Duration(c.GetRTO()) * time.Millisecond
			wait := min(time.Until(time.Unix(0, last).Add(4*max(rto, 30*time.Millisecond))), c.linger)
			if wait > 0 {
				time.Sleep(wait)
			}
		}
		err = c.UDPSession.Close()
	})
	return err
}

var _ transport.Transport = (*Transport)(nil)

// String describes the transport's settings.
func (t *Transport) String() string {
	c := t.cfg
	return fmt.Sprintf("kcp(nodelay=%d,%dms,resend=%d,nc=%d wnd=%d/%d mtu=%d fec=%d/%d)",
		c.NoDelay, c.Interval, c.Resend, c.NoCongestion, c.SendWindow, c.RecvWindow, c.MTU, c.DataShards, c.ParityShards)
}
