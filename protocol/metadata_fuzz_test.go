package protocol_test

import (
	"bytes"
	"context"
	"maps"
	"testing"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/protocol"
)

// checkPairsOnWire attaches the first pairs of kv as a map
// (WithOutgoingMetadata) and appends the rest in two steps
// (AppendOutgoingMetadata), writes fleet.OutgoingPairs into a frame as the
// client does, and checks that the server's reading of the frame (later
// pairs win), fleet.OutgoingMetadata and fleet.LookupOutgoing all agree.
func checkPairsOnWire(t *testing.T, kv []string) {
	t.Helper()
	n := len(kv) / 2
	first := fleet.Metadata{}
	for i := 0; i < n/2; i++ {
		first[kv[2*i]] = kv[2*i+1]
	}
	mid := 2 * (n/2 + (n-n/2)/2)
	ctx := fleet.WithOutgoingMetadata(context.Background(), first)
	ctx = fleet.AppendOutgoingMetadata(ctx, kv[2*(n/2):mid]...)
	ctx = fleet.AppendOutgoingMetadata(ctx, kv[mid:]...)
	want := fleet.OutgoingMetadata(ctx)
	md, pairs := fleet.OutgoingPairs(ctx)
	buf, start := protocol.BeginFrame(nil, &protocol.Header{Type: protocol.TypeRequest, Seq: 1}, "S", "M", md, pairs...)
	if err := protocol.EndFrame(buf, start, 0); err != nil {
		t.Fatal(err)
	}
	big := protocol.Limits{MaxMetadataCount: 1 << 20, MaxMetadataSize: 1 << 20}.WithDefaults()
	fr, err := protocol.Parse(buf[protocol.PrefixSize:], &big)
	if err != nil {
		t.Fatalf("frame of OutgoingPairs refused: %v", err)
	}
	if got := fr.Metadata(); !maps.Equal(got, want) {
		t.Fatalf("server reads %q, OutgoingMetadata %q", got, want)
	}
	for k, v := range want {
		if got, ok := fleet.LookupOutgoing(ctx, k); !ok || got != v {
			t.Fatalf("LookupOutgoing(%q) = %q, %v; want %q", k, got, ok, v)
		}
	}
	const absent = "\xffnot-sent"
	if _, ok := fleet.LookupOutgoing(ctx, absent); ok != hasKey(want, absent) {
		t.Fatalf("LookupOutgoing(%q) = %v, OutgoingMetadata has it: %v", absent, ok, hasKey(want, absent))
	}
}

func hasKey(md fleet.Metadata, k string) bool { _, ok := md[k]; return ok }

// FuzzFrameMetadata builds metadata from arbitrary bytes (NUL-separated
// alternating keys and values) through fleet.AppendOutgoingMetadata and
// fleet.WithOutgoingMetadata, writes it into a frame and parses it back
// under small limits. The helpers must agree with each other (later pairs
// win), a frame within the limits must give back exactly the metadata it
// was given (Metadata and RangeMetadata alike), and one over the limits
// must be refused with ResourceExhausted. The seed corpus is in
// testdata/fuzz/FuzzFrameMetadata.
func FuzzFrameMetadata(f *testing.F) {
	f.Add([]byte("k\x00v"))
	f.Add([]byte("authorization\x00Bearer x\x00trace\x0000-01\x00k\x00dup"))
	f.Add([]byte("\x00\x00\x00"))
	l := protocol.Limits{MaxFrameSize: 4096, MaxMetadataCount: 8, MaxMetadataSize: 256, MaxNameSize: 64}.WithDefaults()
	f.Fuzz(func(t *testing.T, data []byte) {
		parts := bytes.Split(data, []byte{0})
		if len(parts)%2 == 1 {
			parts = parts[:len(parts)-1]
		}
		kv := make([]string, len(parts))
		want := fleet.Metadata{}
		for i, p := range parts {
			kv[i] = string(p)
			if i%2 == 1 {
				want[kv[i-1]] = kv[i]
			}
		}
		ctx := fleet.AppendOutgoingMetadata(context.Background(), kv...)
		got := fleet.OutgoingMetadata(ctx)
		if !maps.Equal(got, want) {
			t.Fatalf("AppendOutgoingMetadata gave %q, want %q", got, want)
		}
		if m := fleet.OutgoingMetadata(fleet.WithOutgoingMetadata(context.Background(), want)); !maps.Equal(m, want) {
			t.Fatalf("WithOutgoingMetadata gave %q, want %q", m, want)
		}

		checkPairsOnWire(t, kv)

		buf, err := protocol.AppendFrame(nil, &protocol.Header{Type: protocol.TypeRequest, Seq: 1}, "S", "M", want, []byte("p"), 0)
		if err != nil {
			t.Fatal(err)
		}
		fr, err := protocol.Parse(buf[protocol.PrefixSize:], &l)
		total, tooBig := 0, len(want) > l.MaxMetadataCount
		for k, v := range want {
			total += len(k) + len(v)
		}
		tooBig = tooBig || total > l.MaxMetadataSize
		if tooBig {
			if fleet.CodeOf(err) != fleet.ResourceExhausted {
				t.Fatalf("%d pairs of %d bytes: got %v, want ResourceExhausted", len(want), total, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("frame within the limits refused: %v", err)
		}
		md := fr.Metadata()
		if len(want) == 0 {
			if md != nil {
				t.Fatalf("no metadata sent, got %q", md)
			}
		} else if !maps.Equal(md, want) {
			t.Fatalf("Metadata() = %q, want %q", md, want)
		}
		n := 0
		fr.RangeMetadata(func(k, v []byte) bool {
			n++
			if w, ok := want[string(k)]; !ok || w != string(v) {
				t.Fatalf("RangeMetadata gave %q=%q, not sent", k, v)
			}
			return true
		})
		if n != len(want) || fr.MetadataLen() != len(want) {
			t.Fatalf("%d pairs ranged, MetadataLen %d, sent %d", n, fr.MetadataLen(), len(want))
		}
		if string(fr.Payload) != "p" {
			t.Fatalf("payload %q after metadata", fr.Payload)
		}
	})
}
