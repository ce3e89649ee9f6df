package regutil_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/registry/internal/regutil"
)

// TestSorted applies puts and deletes to a Sorted and checks after each
// that List equals the map model's List (sorted by Key), that Put and
// Delete report a change exactly when the list changed, and that every
// list taken earlier is left as it was.
func TestSorted(t *testing.T) {
	in := func(addr string, w int) registry.Instance {
		return registry.Instance{Service: "S", Addr: addr, Weight: w, Meta: map[string]string{"w": fmt.Sprint(w)}}
	}
	for _, tc := range []struct {
		name string
		ops  []struct {
			rec  string
			in   *registry.Instance // nil: delete
			want bool               // changed
		}
	}{
		{"put, replace, no-op, move, delete", []struct {
			rec  string
			in   *registry.Instance
			want bool
		}{
			{"k/b", new(in("b", 1)), true},
			{"k/a", new(in("a", 1)), true},
			{"k/c", new(in("c", 1)), true},
			{"k/b", new(in("b", 2)), true},  // replaced in place
			{"k/b", new(in("b", 2)), false}, // equal: no change
			{"k/b", new(in("d", 2)), true},  // the record now holds another instance
			{"k/x", nil, false},             // nothing there
			{"k/a", nil, true},
			{"k/a", nil, false},
		}},
		{"two records, one Key", []struct {
			rec  string
			in   *registry.Instance
			want bool
		}{
			{"k/2", new(in("a", 1)), true},
			{"k/1", new(in("a", 2)), true},
			{"k/1", nil, true},
			{"k/2", nil, true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s regutil.Sorted
			model := map[string]registry.Instance{}
			var taken [][]registry.Instance
			var copies [][]registry.Instance
			for i, op := range tc.ops {
				var got bool
				if op.in != nil {
					got = s.Put(op.rec, *op.in)
					model[op.rec] = *op.in
				} else {
					got = s.Delete(op.rec)
					delete(model, op.rec)
				}
				if got != op.want {
					t.Fatalf("op %d (%s): changed %v, want %v", i, op.rec, got, op.want)
				}
				checkSorted(t, s.List(), model)
				taken = append(taken, s.List())
				copies = append(copies, regutil.Clone(s.List()))
			}
			for i := range taken {
				if !reflect.DeepEqual(taken[i], copies[i]) {
					t.Fatalf("list %d changed after later operations: %v, was %v", i, taken[i], copies[i])
				}
			}
		})
	}
}

// TestSortedRandom: random puts and deletes over a few records, and
// NewSorted of the model, always agree with the model.
func TestSortedRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var s regutil.Sorted
	model := map[string]registry.Instance{}
	for i := range 2000 {
		rec := fmt.Sprintf("k/%d", r.IntN(40))
		if r.IntN(3) == 0 {
			s.Delete(rec)
			delete(model, rec)
		} else {
			in := registry.Instance{Service: "S", Addr: fmt.Sprintf("10.0.0.%d:1", r.IntN(50)), Weight: r.IntN(3)}
			s.Put(rec, in)
			model[rec] = in
		}
		checkSorted(t, s.List(), model)
		if i%100 == 0 {
			var recs []string
			var ins []registry.Instance
			for k, v := range model {
				recs, ins = append(recs, k), append(ins, v)
			}
			n := regutil.NewSorted(recs, ins)
			checkSorted(t, n.List(), model)
			if !reflect.DeepEqual(n.List(), s.List()) {
				t.Fatalf("NewSorted %v, incremental %v", n.List(), s.List())
			}
		}
	}
}

// checkSorted: list holds model's instances, sorted by Key.
func checkSorted(t *testing.T, list []registry.Instance, model map[string]registry.Instance) {
	t.Helper()
	if list == nil {
		t.Fatal("nil list")
	}
	want := regutil.List(model)
	if len(list) != len(want) || !slices.IsSortedFunc(list, func(a, b registry.Instance) int {
		if a.Key() < b.Key() {
			return -1
		}
		if a.Key() > b.Key() {
			return 1
		}
		return 0
	}) {
		t.Fatalf("list %v, want %v", list, want)
	}
	count := map[string]int{}
	for _, in := range want {
		count[fmt.Sprint(in)]++
	}
	for _, in := range list {
		count[fmt.Sprint(in)]--
	}
	for k, n := range count {
		if n != 0 {
			t.Fatalf("list %v, want %v (%s off by %d)", list, want, k, n)
		}
	}
}

// Send delivers every list, even one equal to the last, without copying
// it; a Publish after it is not compared with what Send sent.
func TestFeedSend(t *testing.T) {
	f := regutil.NewFeed()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { f.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	l := list("a")
	f.Send(l)
	if got := recv(t, f.C()); &got[0] != &l[0] {
		t.Fatal("Send copied the list")
	}
	f.Send(list("a"))
	recv(t, f.C())
	f.Publish(list("a"), false)
	recv(t, f.C())
	f.Publish(list("a"), false)
	idle(t, f.C())
}

// Share keeps the list as given; Get still returns a deep copy.
func TestCacheShare(t *testing.T) {
	var c regutil.Cache
	l := list("a")
	l[0].Meta = map[string]string{"k": "v"}
	c.Share("S", l)
	got, ok := c.Get("S")
	if !ok || !reflect.DeepEqual(got, l) {
		t.Fatalf("Get = %v, %v", got, ok)
	}
	got[0].Meta["k"] = "changed"
	if l[0].Meta["k"] != "v" {
		t.Fatal("Get's list shares Meta with the cache")
	}
}
