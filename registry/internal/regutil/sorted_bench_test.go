package regutil_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/registry/internal/regutil"
)

// BenchmarkWatchEvent is the work a watch does for one instance update in
// a service of 50 instances, up to handing the list to the Feed: "map"
// is the map of records, List (collect and sort), Cache.Put (deep copy)
// and Publish (DeepEqual with the last list, deep copy); "sorted" is
// Sorted.Put, Cache.Share and Send of a shallow copy, as the etcd
// Discovery does.
func BenchmarkWatchEvent(b *testing.B) {
	const n = 50
	inst := func(i, v int) registry.Instance {
		return registry.Instance{Service: "S", Addr: fmt.Sprintf("10.0.0.%d:8972", i), Weight: 1, Tags: []string{"v1"},
			Meta: map[string]string{"id": fmt.Sprint(i), "v": fmt.Sprint(v)}}
	}
	rec := func(i int) string { return fmt.Sprintf("/fleet/services/S/10.0.0.%d:8972", i) }
	drain := func(b *testing.B, f *regutil.Feed) func() {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { f.Run(ctx); close(done) }()
		go func() {
			for range f.C() {
			}
		}()
		return func() { cancel(); <-done }
	}
	b.Run("map", func(b *testing.B) {
		m := map[string]registry.Instance{}
		for i := range n {
			m[rec(i)] = inst(i, 0)
		}
		var c regutil.Cache
		f := regutil.NewFeed()
		defer drain(b, f)()
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			m[rec(i%n)] = inst(i%n, i+1)
			list := regutil.List(m)
			c.Put("S", list)
			f.Publish(list, false)
		}
	})
	b.Run("sorted", func(b *testing.B) {
		var s regutil.Sorted
		for i := range n {
			s.Put(rec(i), inst(i, 0))
		}
		var c regutil.Cache
		f := regutil.NewFeed()
		defer drain(b, f)()
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			s.Put(rec(i%n), inst(i%n, i+1))
			list := s.List()
			c.Share("S", list)
			f.Send(slices.Clone(list))
		}
	})
}
