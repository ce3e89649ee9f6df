package selector_test

import (
	"slices"
	"testing"
	"time"

	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/selector"
)

func TestFilters(t *testing.T) {
	list := []registry.Instance{
		{Service: "S", Addr: "a", Group: "blue", Version: "v1", Tags: []string{"ssd", "eu"}},
		{Service: "S", Addr: "b", Group: "blue", Version: "v2", Tags: []string{"eu"}},
		{Service: "S", Addr: "c", Group: "green", Version: "v2", Tags: []string{"ssd", "eu", "gpu"}},
		{Service: "S", Addr: "d", Group: "blue", Version: "v2", Tags: []string{"ssd", "eu"}, State: registry.Draining},
	}
	tests := []struct {
		name    string
		filters []selector.Filter
		want    []string
	}{
		{"none", nil, []string{"a", "b", "c"}},
		{"group", []selector.Filter{selector.ByGroup("blue")}, []string{"a", "b"}},
		{"version", []selector.Filter{selector.ByVersion("v2")}, []string{"b", "c"}},
		{"one tag", []selector.Filter{selector.ByTags("ssd")}, []string{"a", "c"}},
		{"all tags", []selector.Filter{selector.ByTags("ssd", "gpu")}, []string{"c"}},
		{"no tags", []selector.Filter{selector.ByTags()}, []string{"a", "b", "c"}},
		{"combined", []selector.Filter{selector.ByGroup("blue"), selector.ByVersion("v2")}, []string{"b"}},
		{"nothing left", []selector.Filter{selector.ByGroup("red")}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := selector.Filtered(selector.NewRoundRobin(), tt.filters...)
			s.Update(list)
			var got []string
			for range 6 {
				if k := s.Select(&selector.Pick{}); k != "" && !slices.Contains(got, k) {
					got = append(got, k)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("chosen %q, want %q", got, tt.want)
			}
		})
	}
}

// TestFilteredObserver: wrapping keeps the Observer, and only then.
func TestFilteredObserver(t *testing.T) {
	if _, ok := selector.Filtered(selector.NewRandom()).(selector.Observer); ok {
		t.Error("Filtered(random) claims to be an Observer")
	}
	s := selector.Filtered(selector.NewLeastLoaded(), selector.ByGroup("g"))
	o, ok := s.(selector.Observer)
	if !ok {
		t.Fatal("Filtered(leastloaded) is not an Observer")
	}
	s.Update([]registry.Instance{
		{Service: "S", Addr: "a", Group: "g"},
		{Service: "S", Addr: "b", Group: "g"},
		{Service: "S", Addr: "c"},
	})
	o.Begin("a")
	for range 20 {
		if got := s.Select(&selector.Pick{}); got != "b" {
			t.Fatalf("Select = %q, want b (a busy, c filtered out)", got)
		}
	}
	o.End("a", time.Millisecond, nil)
}

// TestFiltersAllocFreeSelect: filtering costs Select nothing.
func TestFiltersAllocFreeSelect(t *testing.T) {
	s := selector.Filtered(selector.NewRandom(), selector.ByTags("eu"))
	s.Update([]registry.Instance{{Service: "S", Addr: "a", Tags: []string{"eu"}}})
	p := &selector.Pick{}
	if n := testing.AllocsPerRun(100, func() { s.Select(p) }); n != 0 {
		t.Errorf("Filtered Select allocates %v times", n)
	}
}
