package protocol_test

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/internal/bufpool"
	"github.com/fleetrpc/fleet/protocol"
)

// TestAwaitAndPeekFrameSize: Await tells a frame buffered whole from one
// still arriving, PeekFrameSize reads the announced size without
// consuming it and refuses a size over the limit, and ReadFrame still
// reads the frame after both.
func TestAwaitAndPeekFrameSize(t *testing.T) {
	frame, err := protocol.AppendFrame(nil, &protocol.Header{Type: protocol.TypeRequest, Seq: 9}, "S", "M", nil, bytes.Repeat([]byte("x"), 1000), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		buf   int // read buffer size
		whole bool
	}{
		{"fits the read buffer", 0, true},
		{"larger than the read buffer", 64, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := protocol.NewReader(bytes.NewReader(frame), tc.buf, protocol.Limits{})
			defer r.Close()
			whole, err := r.Await()
			if err != nil || whole != tc.whole {
				t.Fatalf("Await = %v, %v; want %v", whole, err, tc.whole)
			}
			n, err := r.PeekFrameSize()
			if err != nil || n != len(frame)-protocol.PrefixSize {
				t.Fatalf("PeekFrameSize = %d, %v; want %d", n, err, len(frame)-protocol.PrefixSize)
			}
			f, b, err := r.ReadFrame()
			if err != nil || f.Seq != 9 || len(f.Payload) != 1000 {
				t.Fatalf("ReadFrame after: seq %d, %d-byte payload, %v", f.Seq, len(f.Payload), err)
			}
			bufpool.Put(b)
			if _, err := r.Await(); !errors.Is(err, io.EOF) {
				t.Fatalf("Await at the end: %v, want io.EOF", err)
			}
		})
	}
	r := protocol.NewReader(bytes.NewReader([]byte{0xFF, 0xFF, 0xFF, 0xFF, 0}), 0, protocol.Limits{})
	defer r.Close()
	if _, err := r.PeekFrameSize(); fleet.CodeOf(err) != fleet.ResourceExhausted {
		t.Fatalf("PeekFrameSize of a huge frame: %v, want ResourceExhausted", err)
	}
	r2 := protocol.NewReader(bytes.NewReader([]byte{0, 0}), 0, protocol.Limits{})
	defer r2.Close()
	if _, err := r2.PeekFrameSize(); fleet.CodeOf(err) != fleet.InvalidArgument {
		t.Fatalf("PeekFrameSize of a cut prefix: %v, want InvalidArgument", err)
	}
}
