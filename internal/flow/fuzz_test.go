package flow_test

import (
	"io"
	"testing"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/internal/flow"
)

// FuzzFlow runs a stream's flow control as a script: a sender's Credit
// and a receiver's Inbox of the same window, driven one operation per
// input byte (send a message of some size, take one and return its grant,
// or send one ignoring the credit). It checks the protocol's promises: a
// sender that waits for credit is never refused; one that ignores it is
// refused with ResourceExhausted, queueing nothing; the bytes held stay
// within the window (or one message, when a message larger than the
// window goes alone); sender credit and receiver debt always add up to
// the window; and messages come out in order, all of them, then io.EOF.
// The seed corpus is in testdata/fuzz/FuzzFlow.
func FuzzFlow(f *testing.F) {
	f.Add(uint16(64), []byte{0x10, 0x20, 0x01, 0x30, 0x01, 0x01, 0xff, 0x02})
	f.Add(uint16(1), []byte{0xf0, 0x01, 0x02, 0x02, 0x01})
	closed := make(chan struct{})
	close(closed)
	f.Fuzz(func(t *testing.T, w uint16, script []byte) {
		window := int64(w%4096) + 1
		maxMsg := 2 * window
		c := flow.NewCredit(window)
		in := flow.NewInbox(window, maxMsg)
		var sent, got []int
		outstanding := int64(0) // what the receiver has not granted back, as the model sees it
		rogue := false          // the receiver accepted a message sent without credit
		take := func() {
			m, grant, err := in.Next(closed, func() error { return io.ErrUnexpectedEOF })
			if err != nil {
				t.Fatalf("Next with %d queued: %v", len(sent)-len(got), err)
			}
			got = append(got, len(m.Frame.Payload))
			if got[len(got)-1] != sent[len(got)-1] {
				t.Fatalf("message %d: %d bytes, sent %d", len(got)-1, got[len(got)-1], sent[len(got)-1])
			}
			if grant < 0 {
				t.Fatalf("negative grant %d", grant)
			}
			outstanding -= grant
			c.Add(grant)
		}
		for i, op := range script {
			n := int(int64(op>>2) * maxMsg / 63) // 0..maxMsg bytes
			switch op & 3 {
			case 0, 3: // a well-behaved sender
				if !c.Acquire(int64(n), closed) {
					if len(got) == len(sent) && !rogue {
						t.Fatalf("op %d: no credit for %d bytes with nothing outstanding (credit %d)", i, n, c.Available())
					}
					continue
				}
				if err := in.Push(msg(n)); err != nil {
					if !rogue {
						t.Fatalf("op %d: %d bytes sent within credit refused: %v", i, n, err)
					}
					continue
				}
				sent = append(sent, n)
				outstanding += int64(n)
			case 1:
				if len(got) < len(sent) {
					take()
				}
			case 2: // a sender that ignores its credit
				err := in.Push(msg(n))
				if err == nil {
					sent = append(sent, n)
					outstanding += int64(n)
					rogue = true
					continue
				}
				if fleet.CodeOf(err) != fleet.ResourceExhausted {
					t.Fatalf("op %d: overrun refused with %v", i, err)
				}
			}
			if !rogue && c.Available()+outstanding != window {
				t.Fatalf("op %d: credit %d + not granted %d != window %d", i, c.Available(), outstanding, window)
			}
			if h := in.Held(); h > max(window, window/2+maxMsg) || h < 0 {
				t.Fatalf("op %d: %d bytes held, window %d, message limit %d", i, h, window, maxMsg)
			}
		}
		in.Close(io.EOF)
		for len(got) < len(sent) {
			take()
		}
		if _, _, err := in.Next(closed, func() error { return io.ErrUnexpectedEOF }); err != io.EOF {
			t.Fatalf("drained inbox ended with %v, want io.EOF", err)
		}
		if in.Held() != 0 {
			t.Fatalf("%d bytes held after draining", in.Held())
		}
	})
}
