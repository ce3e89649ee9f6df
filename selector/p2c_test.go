package selector_test

import (
	"errors"
	"testing"
	"time"

	"github.com/fleetrpc/fleet/selector"
)

// simulate makes picks against s, reporting each call's latency (and error)
// from lat right away, and returns the share of picks each server got.
func simulate(s selector.Selector, picks int, lat func(key string) (time.Duration, error)) map[string]float64 {
	o := s.(selector.Observer)
	counts := map[string]int{}
	p := &selector.Pick{}
	for range picks {
		k := s.Select(p)
		counts[k]++
		o.Begin(k)
		d, err := lat(k)
		o.End(k, d, err)
	}
	shares := map[string]float64{}
	for k, n := range counts {
		shares[k] = float64(n) / float64(picks)
	}
	return shares
}

func TestP2CAvoidsSlowServer(t *testing.T) {
	s := selector.NewP2C(selector.P2CConfig{})
	s.Update(weighted(1, 1, 1))
	shares := simulate(s, 10000, func(k string) (time.Duration, error) {
		if k == "c" {
			return 10 * time.Millisecond, nil
		}
		return time.Millisecond, nil
	})
	t.Logf("p2c shares, c 10x slower: a %.4f b %.4f c %.4f", shares["a"], shares["b"], shares["c"])
	if shares["c"] >= shares["a"]/3 || shares["c"] >= shares["b"]/3 {
		t.Errorf("slow server's share %.4f not < 1/3 of the fast ones' (%.4f, %.4f)", shares["c"], shares["a"], shares["b"])
	}
	if shares["a"] < 0.4 || shares["b"] < 0.4 {
		t.Errorf("fast servers not balanced: %v", shares)
	}
}

// TestP2CInFlight: with equal latencies, calls kept in flight on one server
// steer traffic away from it.
func TestP2CInFlight(t *testing.T) {
	s := selector.NewP2C(selector.P2CConfig{})
	o := s.(selector.Observer)
	s.Update(weighted(1, 1, 1))
	for _, k := range []string{"a", "b", "c"} {
		o.Begin(k)
		o.End(k, time.Millisecond, nil)
	}
	for range 5 {
		o.Begin("a") // five calls stuck on a
	}
	shares := simulate(s, 3000, func(string) (time.Duration, error) { return time.Millisecond, nil })
	t.Logf("p2c shares, 5 calls stuck on a: %v", shares)
	if shares["a"] > 0.05 {
		t.Errorf("server with calls in flight got %.3f of the traffic", shares["a"])
	}
}

// TestP2CNewServerGetsTraffic: a server with no samples scores as neutral,
// so it gets its share next to servers that have history.
func TestP2CNewServerGetsTraffic(t *testing.T) {
	s := selector.NewP2C(selector.P2CConfig{})
	s.Update(weighted(1, 1))
	simulate(s, 1000, func(string) (time.Duration, error) { return time.Millisecond, nil })
	s.Update(weighted(1, 1, 1)) // c joins, with no samples
	counts := map[string]int{}
	for range 3000 {
		counts[s.Select(&selector.Pick{})]++ // no End: c stays unsampled
	}
	t.Logf("picks with c new: %v", counts)
	if counts["c"] < 700 {
		t.Errorf("new server got %d of 3000 picks, want about 1000", counts["c"])
	}
}

func TestP2CErrorsPenalised(t *testing.T) {
	s := selector.NewP2C(selector.P2CConfig{ErrorPenalty: 100 * time.Millisecond})
	s.Update(weighted(1, 1, 1))
	boom := errors.New("connection refused")
	// c fails fast: without the penalty it would look like the best.
	shares := simulate(s, 10000, func(k string) (time.Duration, error) {
		if k == "c" {
			return 10 * time.Microsecond, boom
		}
		return time.Millisecond, nil
	})
	t.Logf("p2c shares, c failing: %v", shares)
	if shares["c"] > 0.05 {
		t.Errorf("failing server got %.3f of the traffic", shares["c"])
	}
}

// TestP2CRecovers: estimates decay without samples, so a server once slow
// is tried again.
func TestP2CRecovers(t *testing.T) {
	s := selector.NewP2C(selector.P2CConfig{Decay: 10 * time.Millisecond})
	o := s.(selector.Observer)
	s.Update(weighted(1, 1))
	o.Begin("a")
	o.End("a", time.Millisecond, nil)
	o.Begin("b")
	o.End("b", time.Second, nil)
	for range 100 {
		// b stays 1000 times costlier until both estimates fall below
		// the 1 ns floor, some 20 τ from now.
		if got := s.Select(&selector.Pick{}); got != "a" {
			t.Fatalf("Select = %q right after b reported 1 s", got)
		}
	}
	time.Sleep(400 * time.Millisecond) // 40 τ: both estimates decay to nothing
	counts := map[string]int{}
	for range 1000 {
		counts[s.Select(&selector.Pick{})]++
	}
	if counts["b"] < 300 {
		t.Errorf("after decay b got %d of 1000 picks, want about 500", counts["b"])
	}
}
