package transporttest

import (
	"context"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetrpc/fleet/server"
)

// Strangers describes the unwanted traffic RunStrangers sends at a UDP
// transport's port beside a real client.
type Strangers struct {
	// Seed seeds the random datagrams (deterministic per test).
	Seed uint64
	// Shape, when not nil, may rewrite datagram i (buf, 1 to 1500 random
	// bytes) to look like the transport's own packets.
	Shape func(i int, buf []byte)
	// Peer runs in a loop until stop is closed: a peer of the transport's
	// own kind that connects to addr but does not say the Fleet hello.
	Peer func(t testing.TB, addr string, stop <-chan struct{})
}

// RunStrangers starts a server on network, sends it random datagrams and
// runs st.Peer while a client makes 300 calls, then checks that every call
// succeeded and that the server accepted only the client's connection.
func RunStrangers(t *testing.T, network string, opts Options, st Strangers) {
	var accepted atomic.Int64
	opts.ServerOptions = append(opts.ServerOptions, server.WithPlugin(countAccepts{&accepted}))
	s := StartServer(t, network, opts)
	c := Dial(t, network, s.Addr, opts)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		sprayDatagrams(t, s.Addr, st, stop)
	}()
	go func() {
		defer wg.Done()
		st.Peer(t, s.Addr, stop)
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 300 {
		var r Reply
		if err := c.Call(ctx, "Echo", "Do", &Args{N: i}, &r); err != nil || r.N != 2*i {
			close(stop)
			wg.Wait()
			t.Fatalf("call %d among strangers: %+v, %v", i, r, err)
		}
	}
	close(stop)
	wg.Wait()
	if n := accepted.Load(); n != 1 {
		t.Fatalf("server accepted %d connections, want only the client's", n)
	}
}

// sprayDatagrams sends random datagrams (shaped by st.Shape) to addr from
// one UDP socket until stop is closed, pausing 1 ms every 64.
func sprayDatagrams(t testing.TB, addr string, st Strangers, stop <-chan struct{}) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Error(err)
		return
	}
	defer pc.Close()
	to, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		t.Error(err)
		return
	}
	rng := rand.New(rand.NewPCG(st.Seed, st.Seed+1))
	buf := make([]byte, 1500)
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		n := 1 + rng.IntN(len(buf))
		for j := range n {
			buf[j] = byte(rng.Uint32())
		}
		if st.Shape != nil {
			st.Shape(i, buf[:n])
		}
		_, _ = pc.WriteTo(buf[:n], to)
		if i%64 == 63 {
			time.Sleep(time.Millisecond)
		}
	}
}

// countAccepts counts the connections a server accepted.
type countAccepts struct{ n *atomic.Int64 }

func (c countAccepts) OnConnAccept(nc net.Conn) (net.Conn, bool) {
	c.n.Add(1)
	return nc, true
}
