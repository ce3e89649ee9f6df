package fleet_test

import (
	"maps"
	"sync"
	"testing"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/protocol"
)

// wireSection returns the metadata section of a frame carrying md's pairs
// and then kv's, as a server receives it.
func wireSection(t *testing.T, md fleet.Metadata, kv ...string) (string, int) {
	t.Helper()
	buf, start := protocol.BeginFrame(nil, &protocol.Header{Type: protocol.TypeRequest, Seq: 1}, "S", "M", md, kv...)
	if err := protocol.EndFrame(buf, start, 0); err != nil {
		t.Fatal(err)
	}
	l := protocol.Limits{}.WithDefaults()
	f, err := protocol.Parse(buf[protocol.PrefixSize:], &l)
	if err != nil {
		t.Fatal(err)
	}
	return f.MetadataSection()
}

func TestCallInfoWireMetadata(t *testing.T) {
	var ci fleet.CallInfo
	ci.SetWireMetadata(wireSection(t, fleet.Metadata{"a": "1", "b": "2"}, "b", "3", "c", "", "b", "4"))
	if n := ci.MetadataLen(); n != 5 {
		t.Fatalf("MetadataLen before the map = %d, want 5 pairs as sent", n)
	}
	for k, want := range map[string]string{"a": "1", "b": "4", "c": ""} {
		if v, ok := ci.MetadataValue(k); !ok || v != want {
			t.Fatalf("MetadataValue(%q) = %q, %v; want %q", k, v, ok, want)
		}
	}
	if v, ok := ci.MetadataValue("absent"); ok || v != "" {
		t.Fatalf("MetadataValue(absent) = %q, %v", v, ok)
	}
	// Concurrent first uses make one map between them.
	maps1 := make([]fleet.Metadata, 8)
	var wg sync.WaitGroup
	for i := range maps1 {
		wg.Add(1)
		go func() { defer wg.Done(); maps1[i] = ci.Metadata() }()
	}
	wg.Wait()
	want := fleet.Metadata{"a": "1", "b": "4", "c": ""}
	for _, m := range maps1 {
		if !maps.Equal(m, want) {
			t.Fatalf("Metadata() = %q, want %q", m, want)
		}
	}
	ci.Metadata()["probe"] = "x" // the same map comes back each time
	if _, ok := ci.MetadataValue("probe"); !ok || ci.MetadataLen() != 4 {
		t.Fatal("Metadata() made a new map on a later call")
	}
}

func TestCallInfoSetMetadata(t *testing.T) {
	var ci fleet.CallInfo
	if ci.Metadata() != nil || ci.MetadataLen() != 0 {
		t.Fatal("zero CallInfo has metadata")
	}
	if _, ok := ci.MetadataValue("k"); ok {
		t.Fatal("zero CallInfo has a value")
	}
	md := fleet.Metadata{"k": "v"}
	ci.SetWireMetadata(wireSection(t, fleet.Metadata{"old": "x"}))
	ci.SetMetadata(md)
	if v, _ := ci.MetadataValue("k"); v != "v" || ci.MetadataLen() != 1 || !maps.Equal(ci.Metadata(), md) {
		t.Fatalf("after SetMetadata: %q", ci.Metadata())
	}
	if _, ok := ci.MetadataValue("old"); ok {
		t.Fatal("SetMetadata kept the wire metadata")
	}
	ci.SetMetadata(nil)
	if ci.Metadata() != nil || ci.MetadataLen() != 0 {
		t.Fatal("SetMetadata(nil) left metadata")
	}
	ci.SetWireMetadata("", 0)
	if ci.Metadata() != nil {
		t.Fatal("empty section gave a map")
	}
}
