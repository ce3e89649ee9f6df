package selector_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/fleetrpc/fleet/selector"
)

// BenchmarkSelect measures Select over 10 servers from all CPUs, with a
// hash key so that "hash" takes its ring path.
func BenchmarkSelect(b *testing.B) {
	list := servers(10)
	for _, name := range selector.Names() {
		b.Run(name, func(b *testing.B) {
			s := newByName(b, name)
			s.Update(list)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				p := &selector.Pick{Service: "Arith", Method: "Mul"}
				i := 0
				for pb.Next() {
					i++
					p.Key = keyFor(i)
					if s.Select(p) == "" {
						b.Fatal("no server")
					}
				}
			})
		})
	}
}

// BenchmarkSelectExclude is BenchmarkSelect with 3 of the 10 servers
// excluded, as during retries or with open circuit breakers.
func BenchmarkSelectExclude(b *testing.B) {
	list := servers(10)
	ex := excludeSet(keys(list)[:3]...)
	for _, name := range selector.Names() {
		b.Run(name, func(b *testing.B) {
			s := newByName(b, name)
			s.Update(list)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				p := &selector.Pick{Exclude: ex}
				i := 0
				for pb.Next() {
					i++
					p.Key = keyFor(i)
					if s.Select(p) == "" {
						b.Fatal("no server")
					}
				}
			})
		})
	}
}

// BenchmarkObserve measures a whole call's bookkeeping for the observers:
// Select, Begin and End.
func BenchmarkObserve(b *testing.B) {
	list := servers(10)
	for _, name := range []string{"leastloaded", "p2c"} {
		b.Run(name, func(b *testing.B) {
			s := newByName(b, name)
			s.Update(list)
			o := s.(selector.Observer)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				p := &selector.Pick{}
				for pb.Next() {
					k := s.Select(p)
					o.Begin(k)
					o.End(k, time.Millisecond, nil)
				}
			})
		})
	}
}

// BenchmarkUpdate measures building a snapshot of 100 servers.
func BenchmarkUpdate(b *testing.B) {
	list := servers(100)
	for _, name := range selector.Names() {
		b.Run(name, func(b *testing.B) {
			s := newByName(b, name)
			b.ReportAllocs()
			for b.Loop() {
				s.Update(list)
			}
		})
	}
}

// benchKeys are precomputed so that the benchmarks measure Select only.
var benchKeys = func() []string {
	ks := make([]string, 1024)
	for i := range ks {
		ks[i] = "user-" + strconv.Itoa(i)
	}
	return ks
}()

func keyFor(i int) string { return benchKeys[i&1023] }
