package bench

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestMedianRoundsAndSpread(t *testing.T) {
	var all []EchoResult
	for round, thr := range []float64{100, 140, 120, 90, 130} {
		all = append(all,
			EchoResult{Peer: "fleet", Conns: 1, Callers: 100, Round: round + 1, Throughput: thr},
			EchoResult{Peer: "rpcx", Conns: 1, Callers: 100, Round: round + 1, Throughput: thr / 2})
	}
	med := medianRounds(all)
	if len(med) != 2 {
		t.Fatalf("medianRounds kept %d results, want 2", len(med))
	}
	if med[0].Peer != "fleet" || med[0].Throughput != 120 || med[0].Round != 3 {
		t.Errorf("fleet median = %+v, want round 3 at 120 calls/s", med[0])
	}
	if med[1].Peer != "rpcx" || med[1].Throughput != 60 {
		t.Errorf("rpcx median = %+v, want 60 calls/s", med[1])
	}
	r := &runner{rep: &Report{Echo: med, EchoRounds: all}}
	sp := r.echoSpreads()
	if len(sp) != 2 {
		t.Fatalf("echoSpreads gave %d rows, want 2", len(sp))
	}
	want := (140.0 - 90.0) / 120.0
	if sp[0].Rounds != 5 || sp[0].Min != 90 || sp[0].Max != 140 || math.Abs(sp[0].Spread-want) > 1e-9 {
		t.Errorf("fleet spread = %+v, want 5 rounds, 90..140, spread %.4f", sp[0], want)
	}
}

func TestKeepTail(t *testing.T) {
	md := "# Fleet benchmarks\n\nnew tables\n"
	if got := KeepTail("# old\nold tables\n", md); got != md {
		t.Fatalf("without the marker: %q", got)
	}
	old := "# old\nold tables\n\n" + KeepMarker + "\n\n## Overload\n\nkept\n"
	want := "# Fleet benchmarks\n\nnew tables\n\n" + KeepMarker + "\n\n## Overload\n\nkept\n"
	if got := KeepTail(old, md); got != want {
		t.Fatalf("KeepTail = %q, want %q", got, want)
	}
}

func TestRound2Targets(t *testing.T) {
	ms := time.Millisecond
	echo := func(peer string, callers int, thr float64, p99 time.Duration) EchoResult {
		return EchoResult{Peer: peer, Conns: 1, Callers: callers, Throughput: thr, Latency: Latency{P99: p99}}
	}
	r := &runner{rep: &Report{
		Echo: []EchoResult{
			echo("fleet", 100, 100, 2*ms), echo("rpcx", 100, 40, 5*ms), echo("raw", 100, 200, ms), echo("fleet-obs", 100, 85, 3*ms),
			echo("fleet", 1000, 100, 20*ms), echo("rpcx", 1000, 50, 30*ms),
		},
		EchoSpread: []EchoSpread{{Peer: "fleet", Conns: 1, Callers: 100, Rounds: 5, Median: 100, Min: 95, Max: 105, Spread: 0.10}},
	}}
	got := map[string]string{}
	for _, tg := range r.round2Targets() {
		got[tg.what] = tg.met
	}
	want := map[string]string{
		"R2: echo, 1 connection, 100 callers: Fleet ≥ 2.5× rpcx calls/s":                                  "yes",
		"R2: echo, 1 connection, 100 callers: Fleet p99 ≤ ½ rpcx's":                                       "yes",
		"R2: echo, 1 connection, 1000 callers: Fleet ≥ 2.5× rpcx calls/s":                                 "**no**",
		"R2: echo, 1 connection, 1000 callers: Fleet p99 ≤ ½ rpcx's":                                      "**no**",
		"R2: echo, 1 connection, 100 callers: Fleet ≥ 0.6× the raw TCP echo":                              "**no**",
		"Observability: echo, 1 connection, 100 callers: metrics + tracing cost ≤ 10% of Fleet's calls/s": "**no**",
		"R2: echo, 1 connection(s), 100 callers: Fleet's spread over 5 rounds ≤ 15%":                      "yes",
	}
	if len(got) != len(want) {
		t.Fatalf("round2Targets gave %d targets, want %d: %v", len(got), len(want), got)
	}
	for what, met := range want {
		if got[what] != met {
			t.Errorf("%s: met = %q, want %q", what, got[what], met)
		}
	}
}

// TestEchoRoundRatios checks that Fleet's ratio to a peer is taken round
// by round (Fleet's and the peer's figures from the same round), then
// summarized by median and range, and the per-call CPU medians.
func TestEchoRoundRatios(t *testing.T) {
	fleet := []float64{100, 150, 120}
	rpcx := []float64{50, 50, 80} // ratios 2.0, 3.0, 1.5
	var all []EchoResult
	for i := range fleet {
		all = append(all,
			EchoResult{Peer: "fleet", Conns: 1, Callers: 100, Round: i + 1, Throughput: fleet[i], ClientCPU: float64(i + 1)},
			EchoResult{Peer: "rpcx", Conns: 1, Callers: 100, Round: i + 1, Throughput: rpcx[i],
				ClientCPUPerCall: float64(10 * (i + 1)), ServerCPUPerCall: float64(20 * (i + 1))})
	}
	r := &runner{rep: &Report{Echo: medianRounds(all), EchoRounds: all}}
	sp := r.echoSpreads()
	if len(sp) != 2 {
		t.Fatalf("echoSpreads gave %d rows, want 2", len(sp))
	}
	f, p := sp[0], sp[1]
	if f.FleetRatio != 1 || f.FleetRatioMin != 1 || f.FleetRatioMax != 1 {
		t.Errorf("fleet's own ratio = %v (%v–%v), want 1", f.FleetRatio, f.FleetRatioMin, f.FleetRatioMax)
	}
	// Fleet's client CPU came only as seconds per 100k calls: 2 s/100k is
	// 20 µs per call.
	if f.ClientCPUPerCall != 20 {
		t.Errorf("fleet client CPU = %v µs/call, want 20", f.ClientCPUPerCall)
	}
	if p.FleetRatio != 2 || p.FleetRatioMin != 1.5 || p.FleetRatioMax != 3 {
		t.Errorf("rpcx ratio = %v (%v–%v), want median 2 range 1.5–3", p.FleetRatio, p.FleetRatioMin, p.FleetRatioMax)
	}
	if p.ClientCPUPerCall != 20 || p.ServerCPUPerCall != 40 {
		t.Errorf("rpcx CPU = %v / %v µs/call, want medians 20 / 40", p.ClientCPUPerCall, p.ServerCPUPerCall)
	}
	// The echo table shows the median of the round ratios, not the ratio
	// of the median rounds (120 / 50 = 2.4).
	r.rep.EchoSpread = sp
	r.set = Settings{EchoConns: []int{1}, EchoCallers: []int{100}}
	tab := r.echoTable().String()
	if !strings.Contains(tab, "2.00× ᵐ") || strings.Contains(tab, "2.40×") {
		t.Errorf("echo table does not show the median round ratio:\n%s", tab)
	}
}
