package hello

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Magic is the 8-byte hello of one transport and version, such as
// "FLEETKC\x01".
type Magic [8]byte

// errBadHello: the peer spoke, but not the expected hello.
var errBadHello = errors.New("peer did not answer with the Fleet hello (not a Fleet server over this transport, or another version)")

// Dial runs the client side of the exchange on c: write m, read 8 bytes
// and check they equal m. ctx bounds the exchange; c's deadlines are
// cleared afterwards. On error the caller closes c.
func Dial(ctx context.Context, c net.Conn, m Magic) error {
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if d, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(d)
	}
	if _, err := c.Write(m[:]); err != nil {
		return ctxErr(ctx, err)
	}
	var got Magic
	if _, err := io.ReadFull(c, got[:]); err != nil {
		return ctxErr(ctx, err)
	}
	if got != m {
		return errBadHello
	}
	if !stop() {
		return ctx.Err()
	}
	return c.SetDeadline(time.Time{})
}

// ctxErr prefers ctx's error to the I/O error it caused.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		// The connection's deadline, set from ctx's, fired first.
		return fmt.Errorf("%w (%v)", context.DeadlineExceeded, err)
	}
	return err
}

// answer runs the server side of the exchange: read 8 bytes, check them,
// write them back, within timeout.
func answer(c net.Conn, m Magic, timeout time.Duration) error {
	_ = c.SetDeadline(time.Now().Add(timeout))
	var got Magic
	if _, err := io.ReadFull(c, got[:]); err != nil {
		return err
	}
	if got != m {
		return errBadHello
	}
	if _, err := c.Write(m[:]); err != nil {
		return err
	}
	return c.SetDeadline(time.Time{})
}

// Config describes a Listener. T is what the transport's listener accepts
// (a KCP session, a QUIC connection).
type Config[T any] struct {
	// Magic is the hello to expect and answer.
	Magic Magic
	// Accept returns the next raw connection; an error ends the listener
	// (after Close it is expected).
	Accept func() (T, error)
	// Open turns a raw connection into a stream (for QUIC: accept its
	// first stream). ctx ends at the handshake timeout or at Close. nil
	// means T is itself the net.Conn.
	Open func(ctx context.Context, raw T) (net.Conn, error)
	// Abort closes a raw connection that failed its handshake or was not
	// accepted before Close.
	Abort func(raw T)
	// Close closes the transport's listener, ending Accept. It must not
	// end the connections already accepted.
	Close func() error
	// CloseSocket, if set, releases what the accepted connections share
	// (the UDP socket): it is called once, after Close, when the last
	// connection handed out or in its handshake has closed.
	CloseSocket func() error
	// Addr is the listening address.
	Addr net.Addr
	// Timeout bounds Open and the hello; default 10 s.
	Timeout time.Duration
	// MaxPending bounds the connections in their handshake at once; a
	// connection past it is aborted at once. Default 1024.
	MaxPending int
}

// Listener is a net.Listener that hands out only connections whose peer
// said the hello. Safe for concurrent use.
type Listener[T any] struct {
	cfg     Config[T]
	ready   chan net.Conn
	closing chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
	ctx     context.Context
	cancel  context.CancelFunc
	errMu   sync.Mutex
	err     error // why Accept ended
	pending chan struct{}

	refMu   sync.Mutex
	refs    int  // connections in their handshake or handed out and open
	stopped bool // Close has finished its wait
}

// ref counts a connection that uses the shared socket.
func (l *Listener[T]) ref() {
	l.refMu.Lock()
	l.refs++
	l.refMu.Unlock()
}

// unref releases a connection, closing the socket after the last one once
// the listener is closed.
func (l *Listener[T]) unref() {
	l.refMu.Lock()
	l.refs--
	last := l.refs == 0 && l.stopped
	l.refMu.Unlock()
	if last && l.cfg.CloseSocket != nil {
		_ = l.cfg.CloseSocket()
	}
}

// conn is a connection handed out by the listener.
type conn[T any] struct {
	net.Conn
	once sync.Once
	l    *Listener[T]
}

// Close closes the connection and releases its hold on the socket.
func (c *conn[T]) Close() error {
	err := net.ErrClosed
	c.once.Do(func() {
		err = c.Conn.Close()
		c.l.unref()
	})
	return err
}

// NewListener starts accepting with cfg.
func NewListener[T any](cfg Config[T]) *Listener[T] {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = 1024
	}
	l := &Listener[T]{
		cfg:     cfg,
		ready:   make(chan net.Conn),
		closing: make(chan struct{}),
		pending: make(chan struct{}, cfg.MaxPending),
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.wg.Add(1)
	go l.acceptLoop()
	return l
}

func (l *Listener[T]) acceptLoop() {
	defer l.wg.Done()
	for {
		raw, err := l.cfg.Accept()
		if err != nil {
			l.errMu.Lock()
			l.err = err
			l.errMu.Unlock()
			_ = l.shut()
			return
		}
		select {
		case l.pending <- struct{}{}:
		default: // too many handshakes at once
			l.cfg.Abort(raw)
			continue
		}
		l.ref()
		l.wg.Add(1)
		go l.handshake(raw)
	}
}

func (l *Listener[T]) handshake(raw T) {
	defer l.wg.Done()
	defer func() { <-l.pending }()
	ctx, cancel := context.WithTimeout(l.ctx, l.cfg.Timeout)
	defer cancel()
	var c net.Conn
	handed := false
	defer func() {
		if !handed {
			l.unref()
		}
	}()
	if l.cfg.Open != nil {
		var err error
		if c, err = l.cfg.Open(ctx, raw); err != nil {
			l.cfg.Abort(raw)
			return
		}
	} else {
		c = any(raw).(net.Conn)
	}
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	err := answer(c, l.cfg.Magic, l.cfg.Timeout)
	if !stop() && err == nil {
		err = ctx.Err()
	}
	if err != nil {
		c.Close()
		l.cfg.Abort(raw)
		return
	}
	tc := &conn[T]{Conn: c, l: l}
	select {
	case l.ready <- tc:
		handed = true
	case <-l.closing:
		c.Close()
		l.cfg.Abort(raw)
	}
}

// Accept returns the next connection that completed the hello.
func (l *Listener[T]) Accept() (net.Conn, error) {
	select {
	case c := <-l.ready:
		return c, nil
	case <-l.closing:
		l.errMu.Lock()
		err := l.err
		l.errMu.Unlock()
		if err == nil {
			err = net.ErrClosed
		}
		return nil, &net.OpError{Op: "accept", Net: "udp", Addr: l.cfg.Addr, Err: err}
	}
}

// Close stops listening, closes every connection still in its handshake
// and waits for the listener's goroutines. Connections already accepted
// stay open; the shared socket closes with the last of them.
func (l *Listener[T]) Close() error {
	err := l.shut()
	l.wg.Wait()
	l.refMu.Lock()
	last := l.refs == 0 && !l.stopped
	l.stopped = true
	l.refMu.Unlock()
	if last && l.cfg.CloseSocket != nil {
		_ = l.cfg.CloseSocket()
	}
	return err
}

// shut stops listening once, without waiting.
func (l *Listener[T]) shut() error {
	var err error
	l.once.Do(func() {
		close(l.closing)
		l.cancel()
		err = l.cfg.Close()
	})
	return err
}

// Addr returns the listening address.
func (l *Listener[T]) Addr() net.Addr { return l.cfg.Addr }
