package selector_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/selector"
)

// weighted returns instances named a, b, c, ... with the given weights.
func weighted(ws ...int) []registry.Instance {
	list := make([]registry.Instance, len(ws))
	for i, w := range ws {
		list[i] = registry.Instance{Service: "S", Addr: string(rune('a' + i)), Weight: w}
	}
	return list
}

func TestWeightedRoundRobin(t *testing.T) {
	tests := []struct {
		weights []int
		first   string // the first cycle, when known
	}{
		{weights: []int{5, 1, 1}, first: "aabacaa"}, // nginx's own example
		{weights: []int{1, 1, 1}, first: "abc"},
		{weights: []int{0, 0}, first: "ab"}, // 0 means 1
		{weights: []int{-3, 2}, first: "bab"},
		{weights: []int{3, 2}, first: "abab" + "a"},
		{weights: []int{7}},
		{weights: []int{10, 5, 3, 1, 1}},
		{weights: []int{100, 1}},
		{weights: []int{4, 4, 2, 1}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.weights), func(t *testing.T) {
			list := weighted(tt.weights...)
			total, maxW := 0, 0
			for _, in := range list {
				total += in.EffectiveWeight()
				maxW = max(maxW, in.EffectiveWeight())
			}
			s := selector.NewWeightedRoundRobin()
			s.Update(list)
			var seq strings.Builder
			for cycle := range 5 {
				counts := map[string]int{}
				for range total {
					k := s.Select(&selector.Pick{})
					counts[k]++
					seq.WriteString(k)
				}
				for _, in := range list {
					if got := counts[in.Key()]; got != in.EffectiveWeight() {
						t.Errorf("cycle %d: %s chosen %d times, want %d", cycle, in.Key(), got, in.EffectiveWeight())
					}
				}
			}
			if tt.first != "" && !strings.HasPrefix(seq.String(), tt.first) {
				t.Errorf("sequence %s, want it to start %s", seq.String()[:total], tt.first)
			}
			// Smooth: no server runs longer than its share demands. With
			// weights w and total W, a server is never chosen more than
			// ceil(w / (W-w)) + 1 times in a row.
			for _, in := range list {
				w := in.EffectiveWeight()
				if w == total {
					continue
				}
				limit := (w+total-w-1)/(total-w) + 1
				if run := longestRun(seq.String(), in.Key()); run > limit {
					t.Errorf("%s chosen %d times in a row (limit %d) in %s", in.Key(), run, limit, seq.String())
				}
			}
		})
	}
}

func longestRun(seq, k string) int {
	best, run := 0, 0
	for _, r := range seq {
		if string(r) == k {
			run++
			best = max(best, run)
		} else {
			run = 0
		}
	}
	return best
}

// TestWeightedExclude checks that excluded servers take no part: the rest
// keep their proportions, and the excluded one's current weight does not
// build up while it is excluded.
func TestWeightedExclude(t *testing.T) {
	s := selector.NewWeightedRoundRobin()
	s.Update(weighted(5, 1, 1))
	p := &selector.Pick{Exclude: excludeSet("a")}
	var seq strings.Builder
	for range 6 {
		seq.WriteString(s.Select(p))
	}
	if got := seq.String(); got != "bcbcbc" {
		t.Errorf("with a excluded: %s, want bcbcbc", got)
	}
	counts := map[string]int{}
	for range 7 * 10 {
		counts[s.Select(&selector.Pick{})]++
	}
	if counts["a"] != 50 || counts["b"] != 10 || counts["c"] != 10 {
		t.Errorf("after exclusion ends: %v, want a:50 b:10 c:10", counts)
	}
}

// TestWeightedUpdateKeepsPosition checks that an Update with the same
// servers (as a registry delivers when only load reports change) does not
// restart the sequence, which would favour the heaviest server.
func TestWeightedUpdateKeepsPosition(t *testing.T) {
	s := selector.NewWeightedRoundRobin()
	list := weighted(1, 1, 1)
	s.Update(list)
	counts := map[string]int{}
	for range 300 {
		counts[s.Select(&selector.Pick{})]++
		s.Update(list)
	}
	for _, k := range []string{"a", "b", "c"} {
		if counts[k] != 100 {
			t.Errorf("with an Update after every pick: %v, want 100 each", counts)
			break
		}
	}
	// A server that joins starts from zero and gets its share at once.
	s.Update(weighted(1, 1, 1, 3))
	counts = map[string]int{}
	for range 60 {
		counts[s.Select(&selector.Pick{})]++
	}
	if counts["d"] < 25 || counts["d"] > 35 {
		t.Errorf("after d (weight 3 of 6) joined: %v, want d about 30", counts)
	}
}
