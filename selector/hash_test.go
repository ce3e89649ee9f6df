package selector_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/selector"
)

const hashKeys = 100000

// assign maps every test key to its server.
func assign(s selector.Selector) []string {
	out := make([]string, hashKeys)
	p := &selector.Pick{}
	for i := range out {
		p.Key = fmt.Sprint("user-", i)
		out[i] = s.Select(p)
	}
	return out
}

func TestConsistentHashAddServer(t *testing.T) {
	s := selector.NewConsistentHash(selector.HashConfig{})
	list := servers(11)
	s.Update(list[:10])
	before := assign(s)
	s.Update(list)
	after := assign(s)
	added := list[10].Key()
	moved := 0
	for i := range before {
		if before[i] == after[i] {
			continue
		}
		moved++
		if after[i] != added {
			t.Fatalf("key %d moved from %s to %s, not to the new server", i, before[i], after[i])
		}
	}
	frac := float64(moved) / hashKeys
	t.Logf("adding an 11th server moved %d of %d keys (%.4f; ideal 1/11 = %.4f)", moved, hashKeys, frac, 1.0/11)
	if frac > 1.3/11 {
		t.Errorf("moved %.4f of keys, want <= 1.3/11 = %.4f", frac, 1.3/11)
	}
	if frac < 0.5/11 {
		t.Errorf("moved only %.4f of keys: the new server is starved", frac)
	}
}

func TestConsistentHashRemoveServer(t *testing.T) {
	for _, removed := range []int{0, 4, 9} {
		t.Run(fmt.Sprint(removed), func(t *testing.T) {
			s := selector.NewConsistentHash(selector.HashConfig{})
			list := servers(10)
			s.Update(list)
			before := assign(s)
			gone := list[removed].Key()
			s.Update(slices.Delete(slices.Clone(list), removed, removed+1))
			after := assign(s)
			moved := 0
			for i := range before {
				switch {
				case before[i] == gone && after[i] == gone:
					t.Fatalf("key %d still on the removed server", i)
				case before[i] == gone:
					moved++
				case before[i] != after[i]:
					t.Fatalf("key %d moved from %s to %s though %s stayed", i, before[i], after[i], before[i])
				}
			}
			t.Logf("removing %s moved its %d keys (%.4f) and no others", gone, moved, float64(moved)/hashKeys)
		})
	}
}

// TestConsistentHashDraining: a draining server leaves the ring as if
// removed.
func TestConsistentHashDraining(t *testing.T) {
	s := selector.NewConsistentHash(selector.HashConfig{})
	list := servers(5)
	s.Update(list)
	before := assign(s)
	list[2].State = registry.Draining
	s.Update(list)
	after := assign(s)
	for i := range before {
		if after[i] == list[2].Key() || (before[i] != list[2].Key() && before[i] != after[i]) {
			t.Fatalf("key %d: %s -> %s with %s draining", i, before[i], after[i], list[2].Key())
		}
	}
}

// TestConsistentHashExcludeWalksRing: skipping an excluded owner lands on
// the server the key would have if the owner had left the ring.
func TestConsistentHashExcludeWalksRing(t *testing.T) {
	list := servers(6)
	full := selector.NewConsistentHash(selector.HashConfig{})
	full.Update(list)
	for i := range 100 { // a ring per key: 100 keys suffice
		key := fmt.Sprint("order-", i)
		owner := full.Select(&selector.Pick{Key: key})
		without := selector.NewConsistentHash(selector.HashConfig{})
		without.Update(slices.DeleteFunc(slices.Clone(list), func(in registry.Instance) bool { return in.Key() == owner }))
		want := without.Select(&selector.Pick{Key: key})
		if got := full.Select(&selector.Pick{Key: key, Exclude: excludeSet(owner)}); got != want {
			t.Fatalf("key %s: excluding %s gave %s, want %s", key, owner, got, want)
		}
	}
}

func TestConsistentHashOrderAndDeterminism(t *testing.T) {
	list := servers(8)
	a := selector.NewConsistentHash(selector.HashConfig{})
	a.Update(list)
	shuffled := slices.Clone(list)
	rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	shuffled = append(shuffled, list[3]) // a duplicate is ignored
	b := selector.NewConsistentHash(selector.HashConfig{})
	b.Update(shuffled)
	if !slices.Equal(assign(a), assign(b)) {
		t.Fatal("the ring depends on the order of the servers")
	}
	// The ring is the same in every process: these answers must never
	// change, or clients of different versions would disagree.
	golden := map[string]string{
		"user-1":      "10.0.0.7:8972",
		"user-42":     "10.0.0.5:8972",
		"order-31337": "10.0.0.3:8972",
		"x":           "10.0.0.2:8972",
	}
	for key, want := range golden {
		if got := a.Select(&selector.Pick{Key: key}); got != want {
			t.Errorf("Select(Key %q) = %q, want %q", key, got, want)
		}
	}
}

func TestConsistentHashBalance(t *testing.T) {
	tests := []struct {
		name     string
		cfg      selector.HashConfig
		weights  []int
		wantFrac []float64
	}{
		{"equal", selector.HashConfig{}, []int{1, 1, 1, 1}, []float64{.25, .25, .25, .25}},
		{"weights ignored", selector.HashConfig{}, []int{1, 3}, []float64{.5, .5}},
		{"weighted nodes", selector.HashConfig{WeightedNodes: true}, []int{1, 3}, []float64{.25, .75}},
		{"more nodes", selector.HashConfig{VirtualNodes: 500}, []int{1, 1}, []float64{.5, .5}},
		{"huge weight capped", selector.HashConfig{WeightedNodes: true}, []int{1, math.MaxInt}, []float64{160.0 / (160 + 65536), 65536.0 / (160 + 65536)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := selector.NewConsistentHash(tt.cfg)
			list := weighted(tt.weights...)
			s.Update(list)
			counts := map[string]int{}
			for _, k := range assign(s) {
				counts[k]++
			}
			for i, in := range list {
				got := float64(counts[in.Key()]) / hashKeys
				if got < tt.wantFrac[i]*0.8 || got > tt.wantFrac[i]*1.2 {
					t.Errorf("%s got %.3f of keys, want %.3f ± 20%%", in.Key(), got, tt.wantFrac[i])
				}
			}
		})
	}
}
