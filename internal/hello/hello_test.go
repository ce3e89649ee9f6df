package hello

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var testMagic = Magic{'F', 'L', 'E', 'E', 'T', 'T', 'T', 1}

// TestExchange: Dial and answer agree over a pipe; a wrong magic, a
// short hello and silence fail.
func TestExchange(t *testing.T) {
	for _, tc := range []struct {
		name   string
		client func(c net.Conn) error // what the dialling side does
		ok     bool
	}{
		{"good", func(c net.Conn) error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return Dial(ctx, c, testMagic)
		}, true},
		{"wrong magic", func(c net.Conn) error {
			_, err := c.Write([]byte("GET / HT"))
			return err
		}, false},
		{"other version", func(c net.Conn) error {
			m := testMagic
			m[7] = 2
			_, err := c.Write(m[:])
			return err
		}, false},
		{"short then close", func(c net.Conn) error {
			_, err := c.Write(testMagic[:3])
			c.Close()
			return err
		}, false},
		{"silence", func(c net.Conn) error { return nil }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := net.Pipe()
			defer a.Close()
			defer b.Close()
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = tc.client(a)
			}()
			err := answer(b, testMagic, 200*time.Millisecond)
			if (err == nil) != tc.ok {
				t.Fatalf("answer: %v, want ok=%v", err, tc.ok)
			}
			b.Close()
			a.Close()
			wg.Wait()
		})
	}
}

// TestDialWrongAnswer: a server that answers something else fails Dial.
func TestDialWrongAnswer(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go func() {
		var got [8]byte
		_, _ = b.Read(got[:])
		_, _ = b.Write([]byte("HTTP/1.1"))
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := Dial(ctx, a, testMagic); !errors.Is(err, errBadHello) {
		t.Fatalf("Dial: %v, want errBadHello", err)
	}
}

// TestDialContext: Dial ends at its context's deadline when nobody
// answers.
func TestDialContext(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go func() {
		var got [8]byte
		_, _ = b.Read(got[:]) // read the hello, answer nothing
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := Dial(ctx, a, testMagic); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Dial: %v, want DeadlineExceeded", err)
	}
}

// FuzzAnswer: whatever a peer sends, answer returns (no panic) and
// succeeds only when the first 8 bytes are the magic.
func FuzzAnswer(f *testing.F) {
	f.Add(testMagic[:])
	f.Add([]byte("FLEETTT\x02"))
	f.Add([]byte{})
	f.Add(append(testMagic[:], "extra"...))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, b := net.Pipe()
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { // the peer's writes (net.Pipe is unbuffered)
			defer wg.Done()
			_, _ = a.Write(data)
			if len(data) < 8 {
				a.Close() // a short hello, then the peer goes
			}
		}()
		go func() { // the peer's reads, until the pipe closes
			defer wg.Done()
			var sink [64]byte
			for {
				if _, err := a.Read(sink[:]); err != nil {
					return
				}
			}
		}()
		err := answer(b, testMagic, 5*time.Second)
		b.Close()
		a.Close()
		wg.Wait()
		want := len(data) >= 8 && bytes.Equal(data[:8], testMagic[:])
		if (err == nil) != want {
			t.Fatalf("answer(%q) = %v, want ok=%v", data, err, want)
		}
	})
}
