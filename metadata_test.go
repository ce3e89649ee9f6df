package fleet_test

import (
	"context"
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

// TestOutgoingContextParent: the context that carries outgoing metadata
// still answers its parent's values and cancellation.
func TestOutgoingContextParent(t *testing.T) {
	type key struct{}
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "parent"))
	base := fleet.WithOutgoingMetadata(parent, fleet.Metadata{"a": "1", "t": "0"})
	ctx := fleet.AppendOutgoingMetadata(base, "t", "v")
	if v, ok := fleet.LookupOutgoing(ctx, "t"); !ok || v != "v" {
		t.Errorf("LookupOutgoing(t) = %q, %v; want the appended v", v, ok)
	}
	if v, ok := fleet.LookupOutgoing(ctx, "a"); !ok || v != "1" {
		t.Errorf("LookupOutgoing(a) = %q, %v; want the attached 1", v, ok)
	}
	if ctx.Value(key{}) != "parent" {
		t.Error("the parent's value is lost")
	}
	cancel()
	<-ctx.Done()
	if ctx.Err() != context.Canceled {
		t.Errorf("Err = %v after the parent's cancel", ctx.Err())
	}
}

// TestAppendOutgoingPairCopied: one pair appended to a context without
// appended pairs is copied into the context (the caller may reuse its
// slice) in one allocation, and a later append still sees it.
func TestAppendOutgoingPairCopied(t *testing.T) {
	base := fleet.WithOutgoingMetadata(context.Background(), fleet.Metadata{"a": "1"})
	kv := []string{"t", "1"}
	ctx := fleet.AppendOutgoingMetadata(base, kv...)
	kv[0], kv[1] = "x", "x"
	md, pairs := fleet.OutgoingPairs(ctx)
	if md["a"] != "1" || len(pairs) != 2 || pairs[0] != "t" || pairs[1] != "1" {
		t.Fatalf("OutgoingPairs = %v, %v; want map[a:1], [t 1]", md, pairs)
	}
	ctx2 := fleet.AppendOutgoingMetadata(ctx, "t", "2", "u", "3")
	if _, pairs := fleet.OutgoingPairs(ctx2); len(pairs) != 6 || pairs[1] != "1" || pairs[3] != "2" {
		t.Fatalf("after a second append: %v", pairs)
	}
	if v, _ := fleet.LookupOutgoing(ctx2, "t"); v != "2" {
		t.Errorf("LookupOutgoing(t) = %q, want the later 2", v)
	}
	if _, pairs := fleet.OutgoingPairs(ctx); len(pairs) != 2 || pairs[1] != "1" {
		t.Errorf("the first context changed: %v", pairs)
	}
	kv = []string{"t", "1"}
	if n := testing.AllocsPerRun(100, func() { _ = fleet.AppendOutgoingMetadata(base, kv...) }); n != 1 {
		t.Errorf("appending one pair allocates %v times, want 1", n)
	}
}
