package transporttest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// RelayConfig describes the link a Relay simulates.
type RelayConfig struct {
	// Loss is the share of datagrams dropped, in each direction, 0 to 1.
	Loss float64
	// Delay is added to every datagram in each direction.
	Delay time.Duration
	// Seed seeds the drop decisions (math/rand/v2 PCG): the sequence of
	// decisions is fixed, though which datagram meets which decision
	// depends on timing.
	Seed uint64
}

// Relay is a UDP relay between clients and one server, on 127.0.0.1, that
// drops and delays datagrams: the kernel's netem is not available to
// tests, so loss is simulated in user space. Clients send to Addr; each
// client address gets its own upstream socket towards the server, so the
// server sees one peer per client. It serves at most 256 clients.
type Relay struct {
	cfg      RelayConfig
	server   *net.UDPAddr
	front    *net.UDPConn
	mu       sync.Mutex
	rng      *rand.Rand
	upstream map[string]*net.UDPConn
	wg       sync.WaitGroup
	closing  chan struct{}

	// Forwarded and Dropped count datagrams in both directions.
	Forwarded, Dropped atomic.Int64
}

// delayed is a datagram waiting out the relay's delay.
type delayed struct {
	at   time.Time
	data []byte
	send func([]byte)
}

// NewRelay starts a relay to the UDP server at serverAddr; it is closed
// when the test ends.
func NewRelay(t testing.TB, serverAddr string, cfg RelayConfig) *Relay {
	t.Helper()
	sa, err := net.ResolveUDPAddr("udp", serverAddr)
	if err != nil {
		t.Fatal(err)
	}
	front, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	r := &Relay{
		cfg: cfg, server: sa, front: front,
		rng:      rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		upstream: map[string]*net.UDPConn{},
		closing:  make(chan struct{}),
	}
	q := r.queue()
	r.wg.Add(1)
	go r.readFront(q)
	t.Cleanup(r.Close)
	return r
}

// Addr returns the address clients dial instead of the server's.
func (r *Relay) Addr() string { return r.front.LocalAddr().String() }

// Close stops the relay and waits for its goroutines.
func (r *Relay) Close() {
	r.mu.Lock()
	select {
	case <-r.closing:
		r.mu.Unlock()
		return
	default:
	}
	close(r.closing)
	r.front.Close()
	for _, u := range r.upstream {
		u.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// drop decides the fate of one datagram.
func (r *Relay) drop() bool {
	if r.cfg.Loss <= 0 {
		return false
	}
	r.mu.Lock()
	d := r.rng.Float64() < r.cfg.Loss
	r.mu.Unlock()
	return d
}

// queue starts the goroutine that sends datagrams once their delay has
// passed, in arrival order, and returns its input.
func (r *Relay) queue() chan<- delayed {
	q := make(chan delayed, 8192)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			select {
			case <-r.closing:
				return
			case d := <-q:
				if wait := time.Until(d.at); wait > 0 {
					tm := time.NewTimer(wait)
					select {
					case <-r.closing:
						tm.Stop()
						return
					case <-tm.C:
					}
				}
				d.send(d.data)
			}
		}
	}()
	return q
}

// forward drops, or queues after the delay, one datagram.
func (r *Relay) forward(q chan<- delayed, data []byte, send func([]byte)) {
	if r.drop() {
		r.Dropped.Add(1)
		return
	}
	select {
	case q <- delayed{at: time.Now().Add(r.cfg.Delay), data: data, send: send}:
		r.Forwarded.Add(1)
	default: // the queue is full: a router would drop it too
		r.Dropped.Add(1)
	}
}

// readFront reads datagrams from clients and forwards them upstream.
func (r *Relay) readFront(q chan<- delayed) {
	defer r.wg.Done()
	for {
		buf := make([]byte, 64<<10)
		n, from, err := r.front.ReadFromUDP(buf)
		if err != nil {
			return
		}
		up := r.upstreamFor(from)
		if up == nil {
			continue
		}
		r.forward(q, buf[:n], func(b []byte) { _, _ = up.Write(b) })
	}
}

// upstreamFor returns the upstream socket of a client, opening it and its
// reader on the first datagram; nil past the client limit or when closing.
func (r *Relay) upstreamFor(from *net.UDPAddr) *net.UDPConn {
	key := from.String()
	r.mu.Lock()
	defer r.mu.Unlock()
	if u, ok := r.upstream[key]; ok {
		return u
	}
	select {
	case <-r.closing:
		return nil
	default:
	}
	if len(r.upstream) >= 256 {
		return nil
	}
	u, err := net.DialUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}, r.server)
	if err != nil {
		return nil
	}
	r.upstream[key] = u
	q := r.queue()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			buf := make([]byte, 64<<10)
			n, err := u.Read(buf)
			if err != nil {
				select {
				case <-r.closing:
					return
				default:
				}
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue // ICMP port unreachable, reported once: keep relaying
			}
			r.forward(q, buf[:n], func(b []byte) { _, _ = r.front.WriteToUDP(b, from) })
		}
	}()
	return u
}

// RunLoss serves Echo over network, puts a Relay with cfg between the
// server and one client, and checks that every call of a bounded load
// (16 callers, 25 calls each, some with 32 KiB payloads, each with a
// 30-second deadline) completes, correctly, through it.
func RunLoss(t *testing.T, network string, opts Options, cfg RelayConfig) {
	s := StartServer(t, network, opts)
	r := NewRelay(t, s.Addr, cfg)
	c := Dial(t, network, r.Addr(), opts)
	const callers, calls = 16, 25
	blob := make([]byte, 32<<10)
	for i := range blob {
		blob[i] = byte(i)
	}
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				a := &Args{N: g*1000 + i}
				if i%5 == 0 {
					a.Blob = blob
				}
				var rep Reply
				err := c.Call(ctx, "Echo", "Do", a, &rep)
				cancel()
				if err == nil && (rep.N != 2*a.N || len(rep.Blob) != len(a.Blob)) {
					err = fmt.Errorf("call %d: wrong reply", a.N)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("relay: %d datagrams forwarded, %d dropped", r.Forwarded.Load(), r.Dropped.Load())
	if r.Dropped.Load() == 0 {
		t.Fatal("the relay dropped nothing: the test did not test loss")
	}
}
