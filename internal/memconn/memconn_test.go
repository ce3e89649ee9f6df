package memconn_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fleetrpc/fleet/internal/memconn"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var _ net.Conn = (*memconn.Conn)(nil)

// TestBothWays sends more than the buffer each way at the same time, in
// writes of assorted sizes, and checks both streams arrive whole and in
// order: writers block while the buffer is full and resume as it drains,
// and two ends writing at once do not deadlock.
func TestBothWays(t *testing.T) {
	for _, tc := range []struct{ buffer, total int }{{1, 3000}, {7, 20000}, {4096, 300000}, {0, 1<<20 + 123}} {
		a, b := memconn.Pipe(tc.buffer)
		want := make([]byte, tc.total)
		for i := range want {
			want[i] = byte(i * 7)
		}
		var wg sync.WaitGroup
		got := make([][]byte, 2)
		for i, c := range []*memconn.Conn{a, b} {
			wg.Add(2)
			go func() {
				defer wg.Done()
				for off, n := 0, 1; off < len(want); off, n = off+n, n*3%65537+1 {
					n = min(n, len(want)-off)
					if w, err := c.Write(want[off : off+n]); err != nil || w != n {
						t.Errorf("write: %d, %v", w, err)
						return
					}
				}
			}()
			go func() {
				defer wg.Done()
				var buf bytes.Buffer
				if _, err := io.CopyN(&buf, c, int64(len(want))); err != nil {
					t.Errorf("read: %v", err)
				}
				got[i] = buf.Bytes()
			}()
		}
		wg.Wait()
		for i := range got {
			if !bytes.Equal(got[i], want) {
				t.Fatalf("buffer %d: end %d read %d bytes, not what was written", tc.buffer, i, len(got[i]))
			}
		}
		a.Close()
		b.Close()
	}
}

// TestCloseDelivers checks that what an end wrote before Close reaches
// the peer, which then reads io.EOF; that the peer's writes then fail; and
// that the closed end's own calls fail with net.ErrClosed.
func TestCloseDelivers(t *testing.T) {
	a, b := memconn.Pipe(0)
	if _, err := a.Write([]byte("last words")); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(b)
	if err != nil || string(got) != "last words" {
		t.Fatalf("peer read %q, %v; want the bytes written before Close, then EOF", got, err)
	}
	if _, err := b.Write([]byte("x")); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("write to a closed peer: %v, want io.ErrClosedPipe", err)
	}
	if _, err := a.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read on a closed end: %v, want net.ErrClosed", err)
	}
	if _, err := a.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write on a closed end: %v, want net.ErrClosed", err)
	}
	if err := a.Close(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("second Close: %v, want net.ErrClosed", err)
	}
	if err := a.SetDeadline(time.Now()); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("SetDeadline after Close: %v, want net.ErrClosed", err)
	}
	b.Close()
}

// TestCloseUnblocks checks that Close ends a Read waiting for data and a
// Write waiting for room, on both ends.
func TestCloseUnblocks(t *testing.T) {
	for _, closeSelf := range []bool{true, false} {
		a, b := memconn.Pipe(1)
		if _, err := a.Write([]byte{1}); err != nil { // fills a->b
			t.Fatal(err)
		}
		errs := make(chan error, 2)
		go func() { _, err := a.Read(make([]byte, 1)); errs <- err }()
		go func() { _, err := a.Write([]byte{2}); errs <- err }()
		if closeSelf {
			a.Close()
		} else {
			b.Close()
		}
		for range 2 {
			err := <-errs
			if closeSelf && !errors.Is(err, net.ErrClosed) {
				t.Errorf("own Close: blocked call returned %v, want net.ErrClosed", err)
			}
			if !closeSelf && err != io.EOF && !errors.Is(err, io.ErrClosedPipe) {
				t.Errorf("peer Close: blocked call returned %v, want io.EOF or io.ErrClosedPipe", err)
			}
		}
		a.Close()
		b.Close()
	}
}

// TestDeadlines checks read and write deadlines: one in the past fails
// at once, one that passes while waiting ends the wait, a net.Error with
// Timeout true; clearing or moving it later lets calls work again.
func TestDeadlines(t *testing.T) {
	a, b := memconn.Pipe(1)
	defer a.Close()
	defer b.Close()
	timeout := func(err error) bool {
		var ne net.Error
		return errors.Is(err, os.ErrDeadlineExceeded) && errors.As(err, &ne) && ne.Timeout()
	}

	a.SetReadDeadline(time.Now().Add(-time.Second))
	if _, err := a.Read(make([]byte, 1)); !timeout(err) {
		t.Fatalf("read past the deadline: %v", err)
	}
	a.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := a.Read(make([]byte, 1)); !timeout(err) {
		t.Fatalf("read waiting when the deadline passes: %v", err)
	}
	a.SetReadDeadline(time.Time{})
	b.Write([]byte{9})
	if n, err := a.Read(make([]byte, 1)); n != 1 || err != nil {
		t.Fatalf("read after clearing the deadline: %d, %v", n, err)
	}

	if _, err := a.Write([]byte{1}); err != nil { // fills a->b
		t.Fatal(err)
	}
	a.SetWriteDeadline(time.Now().Add(20 * time.Millisecond))
	if n, err := a.Write([]byte{2, 3}); n != 0 || !timeout(err) {
		t.Fatalf("write waiting when the deadline passes: %d, %v", n, err)
	}
	a.SetWriteDeadline(time.Now().Add(time.Hour))
	go io.ReadFull(b, make([]byte, 2))
	if _, err := a.Write([]byte{2}); err != nil {
		t.Fatalf("write after moving the deadline later: %v", err)
	}

	// A deadline moved later while a call waits keeps it waiting.
	a.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	a.SetReadDeadline(time.Now().Add(time.Hour))
	done := make(chan error, 1)
	go func() { _, err := a.Read(make([]byte, 1)); done <- err }()
	time.Sleep(30 * time.Millisecond)
	b.Write([]byte{5})
	if err := <-done; err != nil {
		t.Fatalf("read with its deadline moved later: %v", err)
	}
}

func TestAddr(t *testing.T) {
	a, b := memconn.Pipe(0)
	defer a.Close()
	defer b.Close()
	for _, ad := range []net.Addr{a.LocalAddr(), a.RemoteAddr(), b.LocalAddr(), b.RemoteAddr()} {
		if ad.Network() != "inprocess" || ad.String() != "inprocess" {
			t.Fatalf("address %s/%s, want inprocess/inprocess", ad.Network(), ad.String())
		}
	}
}

// TestCloseWhileBusy closes one end while both ends read and write as fast
// as they can, and checks that this one Close ends every goroutine's loop
// with an error, on both ends, instead of leaving one hanging; -race checks
// the state they share.
func TestCloseWhileBusy(t *testing.T) {
	for _, closer := range []int{0, 1} {
		a, b := memconn.Pipe(512)
		ends := []*memconn.Conn{a, b}
		var wg sync.WaitGroup
		var moved sync.WaitGroup
		moved.Add(4)
		for _, c := range ends {
			wg.Add(2)
			go func() {
				defer wg.Done()
				buf := make([]byte, 300)
				for i := 0; ; i++ {
					if _, err := c.Write(buf); err != nil {
						if i < 10 {
							moved.Done()
						}
						return
					}
					if i == 10 {
						moved.Done()
					}
				}
			}()
			go func() {
				defer wg.Done()
				buf := make([]byte, 200)
				for i := 0; ; i++ {
					if _, err := c.Read(buf); err != nil {
						if i < 10 {
							moved.Done()
						}
						return
					}
					if i == 10 {
						moved.Done()
					}
				}
			}()
		}
		moved.Wait()         // every goroutine has moved data (or already failed)
		ends[closer].Close() // one Close ends the calls on both ends
		wg.Wait()
		ends[1-closer].Close()
	}
}
