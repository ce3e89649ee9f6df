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
