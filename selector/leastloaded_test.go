package selector_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/selector"
)

func TestLeastLoaded(t *testing.T) {
	tests := []struct {
		name     string
		reported []int64          // registry Load.InFlight of a, b, c
		begun    map[string]int   // Begin calls without End
		ended    map[string]int   // End calls after those
		exclude  []string         // excluded servers
		want     []string         // the servers that may be chosen
		spread   bool             // each of want must be chosen sometimes
		extra    []registry.State // states of a, b, c when not nil
	}{
		{name: "all idle", reported: []int64{0, 0, 0}, want: []string{"a", "b", "c"}, spread: true},
		{name: "fewest in flight", reported: []int64{0, 0, 0}, begun: map[string]int{"a": 3, "b": 1, "c": 2}, want: []string{"b"}},
		{name: "in flight before reported", reported: []int64{9, 0, 5}, begun: map[string]int{"a": 0, "b": 2, "c": 1}, want: []string{"a"}},
		{name: "reported breaks ties", reported: []int64{7, 3, 5}, want: []string{"b"}},
		{name: "random among full ties", reported: []int64{4, 2, 2}, want: []string{"b", "c"}, spread: true},
		{name: "ended calls no longer count", reported: []int64{0, 0, 0}, begun: map[string]int{"a": 2, "b": 2, "c": 1}, ended: map[string]int{"a": 2}, want: []string{"a"}},
		{name: "more ends than begins clamp at zero", reported: []int64{0, 0, 0}, begun: map[string]int{"b": 1, "c": 1}, ended: map[string]int{"a": 5}, want: []string{"a"}},
		{name: "excluded skipped", reported: []int64{0, 0, 0}, begun: map[string]int{"b": 1, "c": 2}, exclude: []string{"a"}, want: []string{"b"}},
		{name: "draining skipped", reported: []int64{0, 0, 0}, begun: map[string]int{"b": 1, "c": 2}, extra: []registry.State{registry.Draining, "", registry.Active}, want: []string{"b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			list := weighted(1, 1, 1)
			for i := range list {
				list[i].Load.InFlight = tt.reported[i]
				if tt.extra != nil {
					list[i].State = tt.extra[i]
				}
			}
			s := selector.NewLeastLoaded()
			s.Update(list)
			o := s.(selector.Observer)
			for k, n := range tt.begun {
				for range n {
					o.Begin(k)
				}
			}
			for k, n := range tt.ended {
				for range n {
					o.End(k, 0, nil)
				}
			}
			p := &selector.Pick{}
			if tt.exclude != nil {
				p.Exclude = excludeSet(tt.exclude...)
			}
			seen := map[string]int{}
			for range 300 {
				k := s.Select(p)
				if !slices.Contains(tt.want, k) {
					t.Fatalf("Select = %q, want one of %q", k, tt.want)
				}
				seen[k]++
			}
			if tt.spread {
				for _, k := range tt.want {
					if seen[k] < 300/len(tt.want)/2 {
						t.Errorf("ties not spread: %v", seen)
					}
				}
			}
		})
	}
}

// TestLeastLoadedCountsSurviveUpdate checks that in-flight counts are kept
// for servers that stay, so a new list (such as a load report) does not
// forget calls still running.
func TestLeastLoadedCountsSurviveUpdate(t *testing.T) {
	s := selector.NewLeastLoaded()
	o := s.(selector.Observer)
	s.Update(weighted(1, 1))
	o.Begin("a")
	o.Begin("b")
	o.Begin("b")
	s.Update(weighted(1, 1, 1)) // c joins
	o.Begin("c")
	o.Begin("c")
	o.Begin("c")
	if got := s.Select(&selector.Pick{}); got != "a" {
		t.Errorf("Select = %q, want a (1 in flight, b 2, c 3)", got)
	}
	o.Begin("unknown") // ignored
	o.End("unknown", 0, nil)
}

// TestLeastLoadedBalances simulates calls that each stay in flight for a
// while: every pick goes to a server with the fewest calls in flight.
func TestLeastLoadedBalances(t *testing.T) {
	s := selector.NewLeastLoaded()
	o := s.(selector.Observer)
	list := servers(4)
	s.Update(list)
	var running []string
	inflight := map[string]int{}
	for i := range 10000 {
		k := s.Select(&selector.Pick{})
		for _, other := range keys(list) {
			if inflight[other] < inflight[k] {
				t.Fatalf("pick %d: chose %s with %d in flight, %s has %d", i, k, inflight[k], other, inflight[other])
			}
		}
		o.Begin(k)
		inflight[k]++
		running = append(running, k)
		if i%3 == 2 { // finish a random running call
			j := rand.N(len(running))
			o.End(running[j], 0, nil)
			inflight[running[j]]--
			running = slices.Delete(running, j, j+1)
		}
	}
}
