package fleet_test

import (
	"context"
	"maps"
	"strings"
	"testing"

	"github.com/fleetrpc/fleet"
)

func TestOutgoingMetadataMerge(t *testing.T) {
	ctx := fleet.WithOutgoingMetadata(context.Background(), fleet.Metadata{"a": "1", "b": "1"})
	md := fleet.Metadata{"b": "2", "c": "2"}
	ctx = fleet.WithOutgoingMetadata(ctx, md)
	md["c"] = "changed after the call"
	got := fleet.OutgoingMetadata(ctx)
	want := fleet.Metadata{"a": "1", "b": "2", "c": "2"}
	if len(got) != len(want) {
		t.Fatalf("OutgoingMetadata = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("OutgoingMetadata[%q] = %q, want %q", k, got[k], v)
		}
	}
	if fleet.OutgoingMetadata(context.Background()) != nil {
		t.Error("OutgoingMetadata(empty context) != nil")
	}
}

func TestCallInfoHelpersOutsideHandler(t *testing.T) {
	ctx := context.Background()
	if fleet.CallInfoFrom(ctx) != nil || fleet.IncomingMetadata(ctx) != nil || fleet.PeerAddr(ctx) != nil {
		t.Error("call helpers return values outside a handler")
	}
	if fleet.SetResponseMetadata(ctx, "k", "v") {
		t.Error("SetResponseMetadata outside a handler reported true")
	}
}

func TestMetadataClone(t *testing.T) {
	var nilMD fleet.Metadata
	if nilMD.Clone() != nil {
		t.Error("nil.Clone() != nil")
	}
	md := fleet.Metadata{"k": "v"}
	c := md.Clone()
	c["k"] = "other"
	if md["k"] != "v" {
		t.Error("Clone shares storage with the original")
	}
}

func TestAppendOutgoingMetadata(t *testing.T) {
	base := fleet.WithOutgoingMetadata(context.Background(), fleet.Metadata{"a": "1", "b": "1"})
	ctx := fleet.AppendOutgoingMetadata(base, "b", "2", "c", "2", "c", "3")
	got := fleet.OutgoingMetadata(ctx)
	want := fleet.Metadata{"a": "1", "b": "2", "c": "3"}
	if len(got) != len(want) {
		t.Fatalf("OutgoingMetadata = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("OutgoingMetadata[%q] = %q, want %q", k, got[k], v)
		}
	}
	if prev := fleet.OutgoingMetadata(base); len(prev) != 2 || prev["b"] != "1" {
		t.Errorf("parent context's metadata changed: %v", prev)
	}
	if md := fleet.OutgoingMetadata(fleet.AppendOutgoingMetadata(context.Background(), "k", "v")); len(md) != 1 || md["k"] != "v" {
		t.Errorf("from an empty context: %v", md)
	}
	defer func() {
		if recover() == nil {
			t.Error("odd number of strings did not panic")
		}
	}()
	fleet.AppendOutgoingMetadata(context.Background(), "k")
}

// TestAppendOutgoingValue: a written value reads as AppendOutgoingMetadata's
// would, over attached metadata and over appended pairs, short (in the
// context's own buffer) and long (outgrowing it); the context still
// answers its parent's values and cancellation.
func TestAppendOutgoingValue(t *testing.T) {
	type key struct{}
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "parent"))
	base := fleet.WithOutgoingMetadata(parent, fleet.Metadata{"a": "1", "t": "0"})
	long := strings.Repeat("0123456789", 10)
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want fleet.Metadata
	}{
		{"empty", context.Background(), fleet.Metadata{"t": "v"}},
		{"attached", base, fleet.Metadata{"a": "1", "t": "v"}},
		{"appended", fleet.AppendOutgoingMetadata(base, "b", "2", "t", "1"), fleet.Metadata{"a": "1", "b": "2", "t": "v"}},
	} {
		for _, v := range []string{"", "short", long} {
			ctx := fleet.AppendOutgoingValue(tc.ctx, "t", func(b []byte) []byte { return append(b, v...) })
			want := fleet.Metadata{}
			for k, w := range tc.want {
				want[k] = w
			}
			want["t"] = v
			if got := fleet.OutgoingMetadata(ctx); !maps.Equal(got, want) {
				t.Errorf("%s, value %.10q: OutgoingMetadata = %v, want %v", tc.name, v, got, want)
			}
			if got, ok := fleet.LookupOutgoing(ctx, "t"); !ok || got != v {
				t.Errorf("%s, value %.10q: LookupOutgoing = %.10q, %v", tc.name, v, got, ok)
			}
		}
	}
	ctx := fleet.AppendOutgoingValue(base, "t", func(b []byte) []byte { return append(b, "v"...) })
	if ctx.Value(key{}) != "parent" {
		t.Error("the parent's value is lost")
	}
	cancel()
	<-ctx.Done()
	if ctx.Err() != context.Canceled {
		t.Errorf("Err = %v after the parent's cancel", ctx.Err())
	}
}
