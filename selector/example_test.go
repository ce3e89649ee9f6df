package selector_test

import (
	"fmt"
	"time"

	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/selector"
)

func ExampleNewWeightedRoundRobin() {
	s := selector.NewWeightedRoundRobin()
	s.Update([]registry.Instance{
		{Service: "Arith", Addr: "a:8972", Weight: 5},
		{Service: "Arith", Addr: "b:8972", Weight: 1},
		{Service: "Arith", Addr: "c:8972", Weight: 1},
	})
	for range 7 {
		fmt.Print(s.Select(&selector.Pick{})[:1], " ")
	}
	fmt.Println()
	// Output: a a b a c a a
}

func ExampleNew() {
	s, err := selector.New("hash", selector.Config{Hash: selector.HashConfig{VirtualNodes: 200}})
	if err != nil {
		panic(err)
	}
	s.Update([]registry.Instance{
		{Service: "Cart", Addr: "10.0.0.1:8972"},
		{Service: "Cart", Addr: "10.0.0.2:8972"},
		{Service: "Cart", Addr: "10.0.0.3:8972", State: registry.Draining},
	})
	// One key keeps reaching one server; a retry skips the one that failed.
	first := s.Select(&selector.Pick{Key: "cart-1234"})
	again := s.Select(&selector.Pick{Key: "cart-1234"})
	retry := s.Select(&selector.Pick{Key: "cart-1234", Exclude: func(k string) bool { return k == first }})
	fmt.Println(first == again, retry != first, retry != "")

	_, err = selector.New("fastest", selector.Config{})
	fmt.Println(err)
	// Output:
	// true true true
	// invalid_argument: selector: unknown selector "fastest" (want one of random, roundrobin, weighted, leastloaded, p2c, hash, geo)
}

func ExampleFiltered() {
	s := selector.Filtered(selector.NewP2C(selector.P2CConfig{}), selector.ByVersion("v2"))
	s.Update([]registry.Instance{
		{Service: "Arith", Addr: "old:8972", Version: "v1"},
		{Service: "Arith", Addr: "new:8972", Version: "v2"},
	})
	key := s.Select(&selector.Pick{})
	// The client reports each call to a selector that learns from outcomes.
	if o, ok := s.(selector.Observer); ok {
		o.Begin(key)
		o.End(key, 3*time.Millisecond, nil)
	}
	fmt.Println(key)
	// Output: new:8972
}
