package kcp

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
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
	var mu sync.Mutex
	sessions := map[string]*conn{} // by remote address, for resets
	fc := &filterConn{PacketConn: pc, onReset: func(from net.Addr, conv uint32) {
		mu.Lock()
		c := sessions[from.String()]
		mu.Unlock()
		if c != nil && c.GetConv() == conv {
			go c.closeByPeer()
		}
	}}
	l, err := kcpgo.ServeConn(block, t.cfg.DataShards, t.cfg.ParityShards, fc)
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
			c := t.wrap(s, pc, s.RemoteAddr())
			key := s.RemoteAddr().String()
			mu.Lock()
			sessions[key] = c
			mu.Unlock()
			c.onClose = func() {
				mu.Lock()
				if sessions[key] == c {
					delete(sessions, key)
				}
				mu.Unlock()
			}
			return c, nil
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
	raddr, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fleet.Errorf(fleet.Unavailable, "kcp: dial %s: %v", addr, err)
	}
	network := "udp4"
	if raddr.IP.To4() == nil {
		network = "udp"
	}
	uc, err := net.ListenUDP(network, nil)
	if err != nil {
		return nil, fleet.Errorf(fleet.Unavailable, "kcp: dial %s: %v", addr, err)
	}
	_ = uc.SetReadBuffer(t.cfg.SocketBuffer)
	_ = uc.SetWriteBuffer(t.cfg.SocketBuffer)
	var cb [4]byte
	_, _ = rand.Read(cb[:])
	conv := binary.LittleEndian.Uint32(cb[:])
	var c *conn
	var ready sync.WaitGroup
	ready.Add(1)
	fc := &filterConn{PacketConn: uc, onReset: func(from net.Addr, got uint32) {
		ready.Wait()
		if got == conv && from.String() == raddr.String() {
			go c.closeByPeer()
		}
	}}
	s, err := kcpgo.NewConn4(conv, raddr, block, t.cfg.DataShards, t.cfg.ParityShards, true, fc)
	if err != nil {
		ready.Done()
		uc.Close()
		return nil, fleet.Errorf(fleet.Unavailable, "kcp: dial %s: %v", addr, err)
	}
	t.tune(s)
	c = t.wrap(s, uc, raddr)
	ready.Done()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.cfg.HandshakeTimeout)
		defer cancel()
	}
	if err := hello.Dial(ctx, c, magic); err != nil {
		c.closeByPeer() // nobody to tell
		return nil, fleet.Errorf(fleet.Unavailable, "kcp: no Fleet server answered at %s: %v", addr, err)
	}
	return c, nil
}

func (t *Transport) wrap(s *kcpgo.UDPSession, pc net.PacketConn, remote net.Addr) *conn {
	return &conn{UDPSession: s, linger: t.cfg.Linger, pc: pc, remote: remote}
}

// resetMagic starts a reset datagram: 8 bytes, then the session's
// conversation id (4 bytes, little endian). kcp-go's own packets are
// longer than 12 bytes, so the two never mix.
var resetMagic = [8]byte{'F', 'L', 'E', 'E', 'T', 'R', 'S', 1}

// resetLen is the length of a reset datagram.
const resetLen = 12

// filterConn is the socket as kcp-go sees it: it takes reset datagrams
// out of the stream and reports them. It implements only net.PacketConn,
// so kcp-go reads one datagram per call rather than in batches.
type filterConn struct {
	net.PacketConn
	onReset func(from net.Addr, conv uint32)
}

// ReadFrom returns the next datagram that is not a reset.
func (f *filterConn) ReadFrom(p []byte) (int, net.Addr, error) {
	for {
		n, from, err := f.PacketConn.ReadFrom(p)
		if err == nil && n == resetLen && [8]byte(p[:8]) == resetMagic {
			f.onReset(from, binary.LittleEndian.Uint32(p[8:12]))
			continue
		}
		return n, from, err
	}
}

// conn is a Fleet connection over one KCP session.
type conn struct {
	*kcpgo.UDPSession
	linger    time.Duration
	pc        net.PacketConn // the socket, to send the reset on
	remote    net.Addr
	onClose   func()       // nil, or what the listener does when it closes
	lastWrite atomic.Int64 // unix nanoseconds
	once      sync.Once
}

// Write writes to the session, noting the time.
func (c *conn) Write(p []byte) (int, error) {
	c.lastWrite.Store(time.Now().UnixNano())
	return c.UDPSession.Write(p)
}

// Close closes the session and tells the peer. KCP has no close
// handshake and kcp-go drops what it has not yet sent when a session
// closes, so when the last write was recent Close first keeps the session
// running for four retransmission timeouts after it (capped by
// Config.Linger), time for the data to be sent and, on a lossy link,
// retransmitted. Then it sends the peer a reset datagram (three times, as
// datagrams may be lost), on which the peer closes its side at once.
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
		var b [resetLen]byte
		copy(b[:], resetMagic[:])
		binary.LittleEndian.PutUint32(b[8:], c.GetConv())
		for range 3 {
			_, _ = c.pc.WriteTo(b[:], c.remote)
		}
		err = c.shut()
	})
	return err
}

// closeByPeer closes the session at once: the peer is gone.
func (c *conn) closeByPeer() {
	c.once.Do(func() { _ = c.shut() })
}

func (c *conn) shut() error {
	err := c.UDPSession.Close()
	if c.onClose != nil {
		c.onClose()
	}
	return err
}

// String describes the transport's settings.
func (t *Transport) String() string {
	c := t.cfg
	return fmt.Sprintf("kcp(nodelay=%d,%dms,resend=%d,nc=%d wnd=%d/%d mtu=%d fec=%d/%d)",
		c.NoDelay, c.Interval, c.Resend, c.NoCongestion, c.SendWindow, c.RecvWindow, c.MTU, c.DataShards, c.ParityShards)
}
