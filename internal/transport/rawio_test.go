package transport_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/fleetrpc/fleet/internal/transport"
)

// rawPair returns the two ends of a connection over network ("tcp" or
// "unix"), the dialling end wrapped by transport.Raw, in serial mode
// (raw system calls) when serial is set.
func rawPair(t *testing.T, network string, serial bool) (raw, peer net.Conn) {
	t.Helper()
	addr := "127.0.0.1:0"
	if network == "unix" {
		addr = filepath.Join(t.TempDir(), "s")
	}
	lis, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, err := lis.Accept()
		if err != nil {
			t.Error(err)
		}
		acc <- c
	}()
	c, err := net.Dial(network, lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	peer = <-acc
	if peer == nil {
		t.FailNow()
	}
	raw = transport.Raw(c)
	transport.SetSerial(raw, serial)
	t.Cleanup(func() { raw.Close(); peer.Close() })
	return raw, peer
}

// TestRawReadWrite: over TCP and Unix sockets, in serial mode and out of
// it, a raw connection reads and writes what a plain one does, including
// a write far larger than the socket buffers (partial writes, waits for
// room) while several goroutines write at once, and reports io.EOF when
// the peer closes.
func TestRawReadWrite(t *testing.T) {
	for _, tc := range []struct {
		network string
		serial  bool
	}{{"tcp", true}, {"unix", true}, {"tcp", false}, {"unix", false}} {
		network := tc.network
		t.Run(fmt.Sprintf("%s/serial=%v", network, tc.serial), func(t *testing.T) {
			raw, peer := rawPair(t, network, tc.serial)
			if _, err := peer.Write([]byte("hello")); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 5)
			if _, err := io.ReadFull(raw, buf); err != nil || string(buf) != "hello" {
				t.Fatalf("read %q, %v", buf, err)
			}
			if n, err := raw.Read(nil); n != 0 || err != nil {
				t.Fatalf("empty read = %d, %v", n, err)
			}

			const writers, size = 4, 1 << 20
			var wg sync.WaitGroup
			for g := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					b := bytes.Repeat([]byte{byte('a' + g)}, size)
					if n, err := raw.Write(b); n != size || err != nil {
						t.Errorf("write = %d, %v", n, err)
					}
				}()
			}
			got := make([]byte, writers*size)
			if _, err := io.ReadFull(peer, got); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			// Each write arrives whole (writes are serialised).
			for off := 0; off < len(got); off += size {
				if !bytes.Equal(got[off:off+size], bytes.Repeat(got[off:off+1], size)) {
					t.Fatalf("write at %d interleaved with another", off)
				}
			}

			peer.Close()
			if n, err := raw.Read(buf); n != 0 || err != io.EOF {
				t.Fatalf("read after the peer closed = %d, %v; want io.EOF", n, err)
			}
		})
	}
}

// TestRawErrors: deadlines and a closed connection give the errors the
// plain connection gives (os.ErrDeadlineExceeded, net.ErrClosed), as
// *net.OpError values.
func TestRawErrors(t *testing.T) {
	raw, _ := rawPair(t, "tcp", true)
	if err := raw.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	var oe *net.OpError
	_, err := raw.Read(make([]byte, 1))
	if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &oe) || oe.Op != "read" {
		t.Fatalf("read past the deadline: %v", err)
	}
	if err := raw.SetWriteDeadline(time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Write([]byte("x")); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write past the deadline: %v", err)
	}
	raw.Close()
	if _, err := raw.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read after close: %v", err)
	}
	if _, err := raw.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write after close: %v", err)
	}
}

// TestRawOtherConnsUnchanged: connections without a socket of their own
// (net.Pipe here; TLS likewise) are returned as they are.
func TestRawOtherConnsUnchanged(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if got := transport.Raw(a); got != a {
		t.Fatalf("Raw(pipe) = %T, want the pipe itself", got)
	}
	transport.SetSerial(a, true) // nothing to switch: no effect, no panic
}
