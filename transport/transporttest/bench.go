package transporttest

import (
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchEcho makes b.N calls of Echo.Do (a 64-byte text) from callers
// concurrent callers over one client connected to addr over network, and
// reports calls/s and the p50 and p99 latency in milliseconds. Failed
// calls are counted in "errors".
func BenchEcho(b *testing.B, network, addr string, callers int, opts Options) {
	c := Dial(b, network, addr, opts)
	args := &Args{Text: "0123456789012345678901234567890123456789012345678901234567890123"}
	var next, errs atomic.Int64
	lat := make([][]time.Duration, callers)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				t0 := time.Now()
				var r Reply
				err := c.Call(ctx, "Echo", "Do", args, &r)
				cancel()
				if err != nil {
					errs.Add(1)
					continue
				}
				lat[g] = append(lat[g], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) > 0 {
		b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
	}
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "calls/s")
	b.ReportMetric(float64(errs.Load()), "errors")
}

// TCPRelay is a TCP proxy on 127.0.0.1 that delays every chunk of bytes by
// a fixed time each way, for comparing TCP with the UDP transports
// through a Relay with the same delay. It drops nothing.
type TCPRelay struct {
	lis   net.Listener
	to    string
	delay time.Duration
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
}

// NewTCPRelay starts a delaying proxy to the TCP address to; it is closed
// when the test ends.
func NewTCPRelay(t testing.TB, to string, delay time.Duration) *TCPRelay {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &TCPRelay{lis: lis, to: to, delay: delay}
	r.wg.Add(1)
	go r.accept()
	t.Cleanup(r.Close)
	return r
}

// Addr returns the address to dial instead of the server's.
func (r *TCPRelay) Addr() string { return r.lis.Addr().String() }

// Close stops the relay, closes its connections and waits for its
// goroutines.
func (r *TCPRelay) Close() {
	r.lis.Close()
	r.mu.Lock()
	for _, c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

func (r *TCPRelay) accept() {
	defer r.wg.Done()
	for {
		in, err := r.lis.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", r.to)
		if err != nil {
			in.Close()
			continue
		}
		r.mu.Lock()
		r.conns = append(r.conns, in, out)
		r.mu.Unlock()
		r.wg.Add(2)
		go r.pump(in, out)
		go r.pump(out, in)
	}
}

// pump copies src to dst, each chunk delivered delay after it was read.
func (r *TCPRelay) pump(src, dst net.Conn) {
	defer r.wg.Done()
	type chunk struct {
		at   time.Time
		data []byte
	}
	q := make(chan chunk, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c := range q {
			time.Sleep(time.Until(c.at))
			if _, err := dst.Write(c.data); err != nil {
				src.Close()
				for range q {
				}
				return
			}
		}
		dst.Close()
	}()
	for {
		buf := make([]byte, 32<<10)
		n, err := src.Read(buf)
		if n > 0 {
			q <- chunk{at: time.Now().Add(r.delay), data: buf[:n]}
		}
		if err != nil {
			if err != io.EOF {
				dst.Close()
			}
			break
		}
	}
	close(q)
	<-done
}

// BenchLinks runs BenchEcho over network at 100 callers directly and
// through a Relay adding 20 ms each way at 0%, 1% and 5% loss.
func BenchLinks(b *testing.B, network string, opts Options) {
	b.Run("direct", func(b *testing.B) {
		s := StartServer(b, network, opts)
		BenchEcho(b, network, s.Addr, 100, opts)
	})
	for _, loss := range []float64{0, 0.01, 0.05} {
		b.Run(fmt.Sprintf("delay20ms-loss%g%%", loss*100), func(b *testing.B) {
			s := StartServer(b, network, opts)
			r := NewRelay(b, s.Addr, RelayConfig{Loss: loss, Delay: 20 * time.Millisecond, Seed: 13})
			BenchEcho(b, network, r.Addr(), 100, opts)
		})
	}
}
