package selector_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/selector"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// geoCfg puts the client in Paris; the servers of servers() are spread
// around Europe so that geo has something to choose.
var geoCfg = selector.GeoConfig{Latitude: 48.8566, Longitude: 2.3522}

// newByName builds a selector of each kind, geo with a located client.
func newByName(t testing.TB, name string) selector.Selector {
	t.Helper()
	cfg := selector.Config{}
	if name == "geo" {
		cfg.Geo = geoCfg
	}
	s, err := selector.New(name, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// servers returns n active instances with keys "10.0.0.<i>:8972" and
// locations spread around Paris.
func servers(n int) []registry.Instance {
	list := make([]registry.Instance, n)
	for i := range list {
		list[i] = registry.Instance{
			Service:   "Arith",
			Addr:      fmt.Sprintf("10.0.0.%d:8972", i),
			Latitude:  48 + float64(i),
			Longitude: 2 + float64(i),
		}
	}
	return list
}

func keys(list []registry.Instance) []string {
	ks := make([]string, len(list))
	for i, in := range list {
		ks[i] = in.Key()
	}
	return ks
}

func excludeSet(ks ...string) func(string) bool {
	return func(k string) bool { return slices.Contains(ks, k) }
}

func TestNames(t *testing.T) {
	want := []string{"random", "roundrobin", "weighted", "leastloaded", "p2c", "hash", "geo"}
	if got := selector.Names(); !slices.Equal(got, want) {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
	for _, name := range append(want, "RoundRobin", " p2c ") {
		if _, err := selector.New(name, selector.Config{}); err != nil {
			t.Errorf("New(%q): %v", name, err)
		}
	}
}

func TestNewUnknown(t *testing.T) {
	s, err := selector.New("fastest", selector.Config{})
	if s != nil || err == nil {
		t.Fatalf("New(fastest) = %v, %v; want nil and an error", s, err)
	}
	if !errors.Is(err, selector.ErrUnknown) {
		t.Errorf("errors.Is(%v, ErrUnknown) = false", err)
	}
	if c := fleet.CodeOf(err); c != fleet.InvalidArgument {
		t.Errorf("CodeOf(%v) = %v, want invalid_argument", err, c)
	}
}

// TestContract checks what every selector promises, through New.
func TestContract(t *testing.T) {
	three := servers(3)
	k := keys(three)
	draining := servers(3)
	draining[0].State = registry.Draining
	draining[2].State = registry.Draining
	noAddr := append(servers(1), registry.Instance{Service: "Arith"})

	tests := []struct {
		name    string
		servers []registry.Instance // nil: never updated
		update  bool
		pick    *selector.Pick
		want    []string // acceptable answers; empty means ""
	}{
		{name: "never updated", pick: &selector.Pick{}},
		{name: "nil pick, never updated"},
		{name: "empty list", update: true, pick: &selector.Pick{}},
		{name: "nil pick", servers: three, update: true, want: k},
		{name: "any", servers: three, update: true, pick: &selector.Pick{}, want: k},
		{name: "with key", servers: three, update: true, pick: &selector.Pick{Key: "user-42"}, want: k},
		{name: "one left", servers: three, update: true,
			pick: &selector.Pick{Exclude: excludeSet(k[0], k[2])}, want: k[1:2]},
		{name: "one left with key", servers: three, update: true,
			pick: &selector.Pick{Key: "user-42", Exclude: excludeSet(k[1], k[2])}, want: k[:1]},
		{name: "all excluded", servers: three, update: true,
			pick: &selector.Pick{Exclude: excludeSet(k...)}},
		{name: "all excluded with key", servers: three, update: true,
			pick: &selector.Pick{Key: "user-42", Exclude: excludeSet(k...)}},
		{name: "draining never chosen", servers: draining, update: true, pick: &selector.Pick{}, want: k[1:2]},
		{name: "draining and excluded", servers: draining, update: true,
			pick: &selector.Pick{Exclude: excludeSet(k[1])}},
		{name: "empty address skipped", servers: noAddr, update: true, pick: &selector.Pick{}, want: k[:1]},
	}
	for _, name := range selector.Names() {
		for _, tt := range tests {
			t.Run(name+"/"+tt.name, func(t *testing.T) {
				s := newByName(t, name)
				if tt.update {
					s.Update(tt.servers)
				}
				for range 200 {
					got := s.Select(tt.pick)
					if len(tt.want) == 0 {
						if got != "" {
							t.Fatalf("Select = %q, want \"\"", got)
						}
						continue
					}
					if !slices.Contains(tt.want, got) {
						t.Fatalf("Select = %q, want one of %q", got, tt.want)
					}
				}
			})
		}
	}
}

// TestEveryServerReachable checks that with no key, no observations and no
// weights every selector spreads over all servers (geo with a client at
// the unknown location (0, 0)).
func TestEveryServerReachable(t *testing.T) {
	list := servers(5)
	for _, name := range selector.Names() {
		t.Run(name, func(t *testing.T) {
			s, err := selector.New(name, selector.Config{})
			if err != nil {
				t.Fatal(err)
			}
			s.Update(list)
			seen := map[string]int{}
			for range 1000 {
				seen[s.Select(&selector.Pick{})]++
			}
			for _, k := range keys(list) {
				if seen[k] == 0 {
					t.Errorf("%s never chosen: %v", k, seen)
				}
			}
		})
	}
}

// TestUpdateNotRetained checks that Update copies what it needs.
func TestUpdateNotRetained(t *testing.T) {
	for _, name := range selector.Names() {
		t.Run(name, func(t *testing.T) {
			s := newByName(t, name)
			list := servers(2)
			s.Update(list)
			for i := range list {
				list[i].Addr = "changed:1"
				list[i].State = registry.Draining
			}
			for range 50 {
				if got := s.Select(&selector.Pick{Key: "k"}); got != "10.0.0.0:8972" && got != "10.0.0.1:8972" {
					t.Fatalf("Select = %q after the caller reused the slice", got)
				}
			}
		})
	}
}

// TestZeroAllocs checks that Select, and Begin and End of the observers,
// allocate nothing, on their fast paths and when Exclude forces a second
// look.
func TestZeroAllocs(t *testing.T) {
	list := servers(10)
	k := keys(list)
	picks := []struct {
		name string
		pick *selector.Pick
	}{
		{"plain", &selector.Pick{Service: "Arith", Method: "Mul"}},
		{"key", &selector.Pick{Key: "user-42"}},
		{"exclude", &selector.Pick{Key: "user-42", Exclude: excludeSet(k[:9]...)}},
		{"exclude all", &selector.Pick{Exclude: excludeSet(k...)}},
	}
	for _, name := range selector.Names() {
		s := newByName(t, name)
		s.Update(list)
		for _, p := range picks {
			t.Run(name+"/"+p.name, func(t *testing.T) {
				allocs := testing.AllocsPerRun(1000, func() { s.Select(p.pick) })
				t.Logf("AllocsPerRun(Select) = %v", allocs)
				if allocs != 0 {
					t.Errorf("Select allocates %v times per call", allocs)
				}
			})
		}
		if o, ok := s.(selector.Observer); ok {
			t.Run(name+"/observer", func(t *testing.T) {
				err := errors.New("boom")
				allocs := testing.AllocsPerRun(1000, func() {
					key := s.Select(picks[0].pick)
					o.Begin(key)
					o.End(key, time.Millisecond, nil)
					o.Begin(key)
					o.End(key, time.Millisecond, err)
				})
				t.Logf("AllocsPerRun(Select+Begin+End) = %v", allocs)
				if allocs != 0 {
					t.Errorf("Select, Begin and End allocate %v times per call", allocs)
				}
			})
		}
	}
}

// TestConcurrent runs Select, Update, Begin and End together; run it with
// -race.
func TestConcurrent(t *testing.T) {
	lists := [][]registry.Instance{servers(3), servers(7), nil, servers(1), servers(12)}
	for _, name := range selector.Names() {
		t.Run(name, func(t *testing.T) {
			s := selector.Filtered(newByName(t, name), func(registry.Instance) bool { return true })
			o, _ := s.(selector.Observer)
			var wg sync.WaitGroup
			stop := make(chan struct{})
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					s.Update(lists[i%len(lists)])
				}
			}()
			for g := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					p := &selector.Pick{Key: fmt.Sprint("key-", g), Exclude: excludeSet("10.0.0.2:8972")}
					for i := range 2000 {
						k := s.Select(p)
						if k == "10.0.0.2:8972" {
							t.Errorf("excluded server chosen")
							return
						}
						if o != nil && k != "" {
							o.Begin(k)
							o.End(k, time.Duration(i)*time.Microsecond, nil)
						}
					}
				}()
			}
			time.Sleep(50 * time.Millisecond)
			close(stop)
			wg.Wait()
		})
	}
}
