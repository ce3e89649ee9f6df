package kcp_test

import (
	"context"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/server"
	"github.com/fleetrpc/fleet/transport"
	"github.com/fleetrpc/fleet/transport/kcp"
	"github.com/fleetrpc/fleet/transport/transporttest"
	kcpgo "github.com/xtaci/kcp-go/v5"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// kcp-go's process-wide scheduler and packet workers.
		goleak.IgnoreTopFunction("github.com/xtaci/kcp-go/v5.(*TimedSched).run"),
		goleak.IgnoreTopFunction("github.com/xtaci/kcp-go/v5.postProcessWorker"),
		goleak.IgnoreAnyFunction("github.com/xtaci/kcp-go/v5.postProcessWorker"),
	)
}

func TestConformance(t *testing.T) {
	transporttest.Run(t, "kcp", transporttest.Options{})
}

// TestConformanceFECAndCipher runs the suite with forward error
// correction and AES on, registered under its own network name.
func TestConformanceFECAndCipher(t *testing.T) {
	transport.Register("kcp-fec", kcp.New(kcp.Config{DataShards: 10, ParityShards: 3, Key: []byte("fleet test key")}))
	transporttest.Run(t, "kcp-fec", transporttest.Options{})
}

// TestDialNoServer: KCP has no handshake of its own, but the Fleet hello
// makes a dial to a port where nothing listens fail with Unavailable.
func TestDialNoServer(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().String()
	pc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err = client.Dial(ctx, "kcp", addr)
	if fleet.CodeOf(err) != fleet.Unavailable {
		t.Fatalf("dial: %v, want Unavailable", err)
	}
}

// TestCipherMismatch: a client with another key never completes the
// hello (its packets fail the server's check) and fails with Unavailable.
func TestCipherMismatch(t *testing.T) {
	s := transporttest.StartServer(t, "kcp", transporttest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := kcp.New(kcp.Config{Key: []byte("wrong")}).Dial(ctx, s.Addr)
	if fleet.CodeOf(err) != fleet.Unavailable {
		t.Fatalf("dial with another key: %v, want Unavailable", err)
	}
}

// countConns counts the connections the server accepted.
type countConns struct{ n atomic.Int64 }

func (c *countConns) OnConnAccept(nc net.Conn) (net.Conn, bool) {
	c.n.Add(1)
	return nc, true
}

// TestStrangers: random datagrams, and a KCP peer that does not say the
// Fleet hello, reach no Fleet connection and do not disturb a client
// calling at the same time.
func TestStrangers(t *testing.T) {
	cc := &countConns{}
	opts := transporttest.Options{ServerOptions: []server.Option{server.WithPlugin(cc)}}
	s := transporttest.StartServer(t, "kcp", opts)
	c := transporttest.Dial(t, "kcp", s.Addr, opts)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // random datagrams, some shaped like KCP packets
		defer wg.Done()
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Error(err)
			return
		}
		defer pc.Close()
		to, _ := net.ResolveUDPAddr("udp", s.Addr)
		rng := rand.New(rand.NewPCG(1, 2))
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
			_, _ = pc.WriteTo(buf[:n], to)
			if i%64 == 63 {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	go func() { // a KCP peer that sends garbage instead of the hello
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			blk, _ := kcpgo.NewNoneBlockCrypt(nil)
			sess, err := kcpgo.DialWithOptions(s.Addr, blk, 0, 0)
			if err != nil {
				t.Error(err)
				return
			}
			_, _ = sess.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
			time.Sleep(20 * time.Millisecond)
			sess.Close()
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 300 {
		var r transporttest.Reply
		if err := c.Call(ctx, "Echo", "Do", &transporttest.Args{N: i}, &r); err != nil || r.N != 2*i {
			t.Fatalf("call %d among strangers: %+v, %v", i, r, err)
		}
	}
	close(stop)
	wg.Wait()
	if n := cc.n.Load(); n != 1 {
		t.Fatalf("server accepted %d connections, want only the client's", n)
	}
}
