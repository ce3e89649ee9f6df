package protocol_test

import (
	"bytes"
	"io"
	"testing"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/internal/bufpool"
	"github.com/fleetrpc/fleet/protocol"
)

// FuzzReadFrame feeds arbitrary streams to the frame reader with small
// limits. It must never panic, every error must carry a Fleet code (or be
// io.EOF), and every frame it accepts must re-encode to the same bytes.
// Seeds are in testdata/fuzz/FuzzReadFrame.
func FuzzReadFrame(f *testing.F) {
	seed, _ := protocol.AppendFrame(nil, &protocol.Header{Type: protocol.TypeRequest, Seq: 9, Timeout: 100}, "Arith", "Add", fleet.Metadata{"k": "v"}, []byte("payload"), 0)
	f.Add(seed)
	l := protocol.Limits{MaxFrameSize: 4096, MaxMetadataCount: 8, MaxMetadataSize: 512, MaxNameSize: 64}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := protocol.NewReader(bytes.NewReader(data), 0, l)
		for {
			fr, b, err := r.ReadFrame()
			if err != nil {
				if err != io.EOF {
					if c := fleet.CodeOf(err); c != fleet.InvalidArgument && c != fleet.ResourceExhausted {
						t.Fatalf("error with code %v: %v", c, err)
					}
				}
				return
			}
			if fr.MetadataLen() > l.MaxMetadataCount || len(fr.Service) > l.MaxNameSize {
				t.Fatalf("limits not enforced: %d pairs, %d-byte name", fr.MetadataLen(), len(fr.Service))
			}
			md := fr.Metadata()
			if len(md) == fr.MetadataLen() { // no duplicate keys: the encoding is reproducible up to pair order
				again, err := protocol.AppendFrame(nil, &fr.Header, string(fr.Service), string(fr.Method), md, fr.Payload, 0)
				if err != nil {
					t.Fatal(err)
				}
				g, gb, err := protocol.NewReader(bytes.NewReader(again), 0, l).ReadFrame()
				if err != nil {
					t.Fatalf("re-encoded frame does not parse: %v", err)
				}
				if g.Header != fr.Header || !bytes.Equal(g.Payload, fr.Payload) || !bytes.Equal(g.Service, fr.Service) {
					t.Fatal("re-encoded frame differs")
				}
				bufpool.Put(gb)
			}
			bufpool.Put(b)
		}
	})
}
