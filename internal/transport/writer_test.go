package transport_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/fleetrpc/fleet/internal/transport"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestConcurrentWritesArriveWhole: frames from many goroutines arrive
// whole and none is lost or interleaved.
func TestConcurrentWritesArriveWhole(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	w := transport.NewWriter(a, 0, 0)
	done := make(chan error, 1)
	go func() { done <- w.Run(0, nil) }()
	const writers, each = 16, 200
	var wg sync.WaitGroup
	for g := 0; g < writers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				frame := make([]byte, 4+g+1)
				binary.BigEndian.PutUint32(frame, uint32(g+1))
				for k := 4; k < len(frame); k++ {
					frame[k] = byte(g)
				}
				if err := w.Write(frame); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	counts := make([]int, writers)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		var hdr [4]byte
		for n := 0; n < writers*each; n++ {
			if _, err := io.ReadFull(b, hdr[:]); err != nil {
				t.Error(err)
				return
			}
			body := make([]byte, binary.BigEndian.Uint32(hdr[:]))
			if _, err := io.ReadFull(b, body); err != nil {
				t.Error(err)
				return
			}
			g := int(body[0])
			if !bytes.Equal(body, bytes.Repeat([]byte{byte(g)}, g+1)) {
				t.Errorf("frame of writer %d corrupted", g)
				return
			}
			counts[g]++
		}
	}()
	wg.Wait()
	<-readDone
	for g, n := range counts {
		if n != each {
			t.Fatalf("writer %d: %d frames arrived, want %d", g, n, each)
		}
	}
	w.Fail(errors.New("done"))
	a.Close()
	<-done
}

// TestBackpressure: with the peer not reading, writers block once the
// queue is over its bound instead of buffering without limit.
func TestBackpressure(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	w := transport.NewWriter(a, 0, 1024)
	go w.Run(0, nil)
	blocked := make(chan struct{})
	go func() {
		for i := 0; i < 100; i++ {
			if w.Write(make([]byte, 512)) != nil {
				break
			}
		}
		close(blocked)
	}()
	select {
	case <-blocked:
		t.Fatal("100 writes of 512 bytes finished with nobody reading")
	case <-time.After(100 * time.Millisecond):
	}
	failure := errors.New("closed")
	w.Fail(failure)
	a.Close()
	select {
	case <-blocked:
	case <-time.After(2 * time.Second):
		t.Fatal("a blocked writer was not released by Fail")
	}
	if err := w.Write([]byte("x")); err != failure {
		t.Fatalf("Write after Fail = %v", err)
	}
}

// TestCloseAndFlushWritesQueued: frames queued before CloseAndFlush are
// written; later ones are refused.
func TestCloseAndFlushWritesQueued(t *testing.T) {
	a, b := net.Pipe()
	w := transport.NewWriter(a, 0, 0)
	go w.Run(0, nil)
	got := make(chan []byte, 1)
	go func() { data, _ := io.ReadAll(b); got <- data }()
	for i := 0; i < 10; i++ {
		w.Write([]byte("frame"))
	}
	closed := errors.New("closed")
	if !w.CloseAndFlush(closed, 2*time.Second) {
		t.Fatal("flush did not finish")
	}
	if err := w.Write([]byte("late")); err != closed {
		t.Fatalf("Write after close = %v", err)
	}
	a.Close()
	if data := <-got; string(data) != string(bytes.Repeat([]byte("frame"), 10)) {
		t.Fatalf("peer got %q", data)
	}
}

// TestWriteUrgentInOrder: frames queued with WriteUrgent go out like
// Write's, in the order they were queued, and WriteUrgent refuses frames
// once the writer is closed.
func TestWriteUrgentInOrder(t *testing.T) {
	a, b := net.Pipe()
	w := transport.NewWriter(a, 0, 0)
	done := make(chan error, 1)
	go func() { done <- w.Run(0, nil) }()
	got := make(chan []byte, 1)
	go func() { data, _ := io.ReadAll(b); got <- data }()
	var want bytes.Buffer
	for i := 0; i < 50; i++ {
		frame := []byte{'w', byte(i)}
		write := w.Write
		if i%3 == 0 {
			frame[0], write = 'u', w.WriteUrgent
		}
		if err := write(frame); err != nil {
			t.Fatal(err)
		}
		want.Write(frame)
	}
	closed := errors.New("closed")
	if !w.CloseAndFlush(closed, 10*time.Second) {
		t.Fatal("flush did not finish")
	}
	if err := w.WriteUrgent([]byte("late")); err != closed {
		t.Fatalf("WriteUrgent after close = %v", err)
	}
	a.Close()
	if data := <-got; !bytes.Equal(data, want.Bytes()) {
		t.Fatalf("peer got %q, want %q", data, want.Bytes())
	}
	<-done
}

// TestWriteNowWritesItself: on an idle writer WriteNow makes the write on
// the calling goroutine (Run is not even started); once frames are
// queued, WriteNow queues behind them, and Run writes them all in order.
func TestWriteNowWritesItself(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	w := transport.NewWriter(a, 0, 0)
	got := make(chan []byte, 3)
	go func() {
		for {
			buf := make([]byte, 2)
			if _, err := io.ReadFull(b, buf); err != nil {
				close(got)
				return
			}
			got <- buf
		}
	}()
	if err := w.WriteNow([]byte("n1")); err != nil {
		t.Fatal(err)
	}
	// net.Pipe delivers only to a reader: the frame was written by the
	// time WriteNow returned, with no Run to write it.
	if f := <-got; string(f) != "n1" {
		t.Fatalf("first frame %q", f)
	}
	if err := w.Write([]byte("q2")); err != nil { // queued: no Run yet
		t.Fatal(err)
	}
	if err := w.WriteNow([]byte("n3")); err != nil { // behind q2
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(0, nil) }()
	for _, want := range []string{"q2", "n3"} {
		if f := <-got; string(f) != want {
			t.Fatalf("frame %q, want %q", f, want)
		}
	}
	w.Fail(errors.New("done"))
	a.Close()
	<-done
}

// TestWriteNowMixedArriveWholeInOrder: goroutines writing with WriteNow
// and with Write at once: every frame arrives whole, none is lost, and
// each goroutine's frames arrive in the order it wrote them.
func TestWriteNowMixedArriveWholeInOrder(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	w := transport.NewWriter(a, 0, 0)
	done := make(chan error, 1)
	go func() { done <- w.Run(0, nil) }()
	const writers, each = 8, 300
	var wg sync.WaitGroup
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			write := w.Write
			if g%2 == 0 {
				write = w.WriteNow
			}
			for i := range each {
				// length 8+g, writer g, sequence i, then g filler bytes
				frame := make([]byte, 4+8+g)
				binary.BigEndian.PutUint32(frame, uint32(8+g))
				binary.BigEndian.PutUint32(frame[4:], uint32(g))
				binary.BigEndian.PutUint32(frame[8:], uint32(i))
				for k := 12; k < len(frame); k++ {
					frame[k] = byte(g)
				}
				if err := write(frame); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	next := make([]int, writers)
	var hdr [4]byte
	for n := 0; n < writers*each; n++ {
		if _, err := io.ReadFull(b, hdr[:]); err != nil {
			t.Fatal(err)
		}
		body := make([]byte, binary.BigEndian.Uint32(hdr[:]))
		if _, err := io.ReadFull(b, body); err != nil {
			t.Fatal(err)
		}
		g, i := int(binary.BigEndian.Uint32(body)), int(binary.BigEndian.Uint32(body[4:]))
		if g >= writers || len(body) != 8+g || !bytes.Equal(body[8:], bytes.Repeat([]byte{byte(g)}, g)) {
			t.Fatalf("frame %d corrupted: % x", n, body)
		}
		if i != next[g] {
			t.Fatalf("writer %d: frame %d arrived, want %d", g, i, next[g])
		}
		next[g]++
	}
	wg.Wait()
	w.Fail(errors.New("done"))
	a.Close()
	<-done
}

// TestCloseAndFlushWaitsForWriteNow: Run does not end a closing writer
// while a WriteNow is still writing, so the caller that closes the
// connection after Done cannot cut that frame.
func TestCloseAndFlushWaitsForWriteNow(t *testing.T) {
	for range 20 {
		a, b := net.Pipe()
		w := transport.NewWriter(a, 0, 0)
		go w.Run(0, nil)
		var wrote sync.WaitGroup
		wrote.Add(1)
		var nowErr error
		returned := make(chan struct{})
		go func() {
			defer close(returned)
			wrote.Done()
			nowErr = w.WriteNow([]byte("now!"))
		}()
		wrote.Wait()
		flushed := make(chan bool, 1)
		go func() { flushed <- w.CloseAndFlush(errors.New("closed"), 5*time.Second) }()
		// The peer reads only now: until then a WriteNow that began
		// blocks in the pipe's Write.
		got := make(chan []byte, 1)
		go func() { data, _ := io.ReadAll(b); got <- data }()
		<-w.Done()
		if !<-flushed {
			t.Fatal("flush did not finish")
		}
		// Close the connection once Run is done, as the client and the
		// server do: a WriteNow still in its write would be cut and fail
		// with the pipe's error rather than the writer's.
		a.Close()
		<-returned
		data := <-got
		if nowErr != nil && nowErr.Error() != "closed" {
			t.Fatalf("WriteNow was cut: %v", nowErr)
		}
		if nowErr == nil && string(data) != "now!" {
			t.Fatalf("WriteNow succeeded but the peer got %q", data)
		}
		if nowErr != nil && len(data) != 0 {
			t.Fatalf("WriteNow failed (%v) but the peer got %q", nowErr, data)
		}
		b.Close()
	}
}

// TestWriteNowQueuesLargeFrames: a frame over DirectMax is queued even on
// an idle writer, so without Run it is not written.
func TestWriteNowQueuesLargeFrames(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	w := transport.NewWriter(a, 0, 0)
	big := bytes.Repeat([]byte{7}, transport.DirectMax+1)
	if err := w.WriteNow(big); err != nil { // returns at once: queued
		t.Fatal(err)
	}
	got := make(chan []byte, 1)
	go func() {
		buf := make([]byte, len(big))
		_, err := io.ReadFull(b, buf)
		if err != nil {
			buf = nil
		}
		got <- buf
	}()
	done := make(chan error, 1)
	go func() { done <- w.Run(0, nil) }()
	if data := <-got; !bytes.Equal(data, big) {
		t.Fatalf("peer got %d bytes, want the frame of %d", len(data), len(big))
	}
	w.Fail(errors.New("done"))
	a.Close()
	<-done
}
