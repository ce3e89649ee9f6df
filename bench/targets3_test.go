package bench

import (
	"strings"
	"testing"
)

// checkTargets compares targets with want, what → {figure, met}.
func checkTargets(t *testing.T, ts []target, want map[string][2]string) {
	t.Helper()
	got := map[string][2]string{}
	for _, tg := range ts {
		got[tg.what] = [2]string{tg.figure, tg.met}
	}
	if len(got) != len(want) {
		t.Errorf("got %d targets, want %d:", len(got), len(want))
		for what, g := range got {
			t.Errorf("  %s | %s | %s", what, g[0], g[1])
		}
	}
	for what, w := range want {
		g, ok := got[what]
		if !ok {
			t.Errorf("missing target %q", what)
			continue
		}
		if g != w {
			t.Errorf("%s:\n got  %q, %q\n want %q, %q", what, g[0], g[1], w[0], w[1])
		}
	}
}

// TestRound3TargetsRounds checks the round-3 echo targets of a --repeat
// run: each is the median of the per-round ratios, with their range, the
// best peer is the one Fleet leads least, and CPU uses the round medians.
func TestRound3TargetsRounds(t *testing.T) {
	type peerRounds struct {
		peer     string
		thr      [2]float64
		cli, srv float64 // CPU µs per call in both rounds
	}
	var all []EchoResult
	for _, p := range []peerRounds{
		{"fleet", [2]float64{300, 400}, 10, 5},
		{"rpcx", [2]float64{100, 100}, 40, 20},      // ratios 3, 4
		{"arpc", [2]float64{120, 200}, 20, 15},      // ratios 2.5, 2: the best peer
		{"kitex", [2]float64{100, 160}, 30, 30},     // ratios 3, 2.5
		{"fleet-obs", [2]float64{294, 380}, 12, 6},  // 0.98, 0.95 of Fleet
		{"fleet-grpc", [2]float64{100, 120}, 50, 9}, // 1.0, 1.2 of gRPC
		{"grpc", [2]float64{100, 100}, 50, 50},
		{"raw", [2]float64{400, 600}, 5, 5}, // Fleet 0.75, 0.667 of it
	} {
		for i, thr := range p.thr {
			all = append(all, EchoResult{Peer: p.peer, Conns: 1, Callers: 100, Round: i + 1, Throughput: thr,
				ClientCPUPerCall: p.cli, ServerCPUPerCall: p.srv})
		}
	}
	r := &runner{rep: &Report{Echo: medianRounds(all), EchoRounds: all}, set: Settings{EchoConns: []int{1}, EchoCallers: []int{100}}}
	r.rep.EchoSpread = r.echoSpreads()
	checkTargets(t, r.round3Targets(), map[string][2]string{
		"R3: echo, 1 connection, 100 callers: Fleet ≥ 2.5× the best of rpcx, arpc, Kitex and Kitex (mux)": {
			"arpc (best) 2.25× (rounds 2.00–2.50×, median of 2); rpcx 3.50×, Kitex 2.75×", "**no**"},
		"R3: echo, 1 connection, 100 callers: Fleet with metrics + tracing ≥ 0.95× plain Fleet": {
			"0.96× (rounds 0.95–0.98×, median of 2) = 3.5% less", "yes"},
		"R3: echo, 1 connection, 100 callers: gRPC client through Fleet's gateway ≥ 1.2× grpc-go's server": {
			"1.10× (rounds 1.00–1.20×, median of 2)", "**no**"},
		"R3: echo, 1 connection, 100 callers: Fleet ≥ 0.65× the raw TCP echo": {
			"0.71× (rounds 0.67–0.75×, median of 2)", "yes"},
		"R3: echo, 1 connection, 100 callers: Fleet's client + server CPU per call ≤ ½ the lowest peer's": {
			"Fleet 15.0 vs arpc (lowest) 35.0 µs/call = 0.43×", "yes"},
	})
	if tab := r.targetsTable(); !strings.Contains(tab, "| R3: echo, 1 connection, 100 callers: Fleet ≥ 0.65× the raw TCP echo | 0.71× (rounds 0.67–0.75×, median of 2) | yes |") {
		t.Errorf("targets table lacks the R3 raw row:\n%s", tab)
	}
}

// TestRound3TargetsSingleRun checks the round-3 targets of a run without
// rounds: single-run ratios, serial calls (math long connection and echo
// at 1 caller), streams, and targets skipped for peers not measured.
func TestRound3TargetsSingleRun(t *testing.T) {
	echo := func(peer string, callers int, thr, cpu float64) EchoResult {
		return EchoResult{Peer: peer, Conns: 1, Callers: callers, Throughput: thr, ClientCPUPerCall: cpu, ServerCPUPerCall: cpu}
	}
	long := func(peer string, thr float64) MathResult {
		return MathResult{Peer: peer, Test: "long", Target: 10000, Calls: 10000, Throughput: thr}
	}
	r := &runner{rep: &Report{
		Echo: []EchoResult{
			echo("fleet", 1, 10000, 30), echo("arpc", 1, 8000, 40),
			echo("fleet", 1000, 200, 10), echo("rpcx", 1000, 50, 30), echo("kitex-mux", 1000, 100, 20),
		},
		Math: []MathResult{long("fleet", 1400), long("arpc", 900), long("kitex", 1000), long("grpc", 100)},
		Streams: []StreamResult{
			{Peer: "fleet", Test: "server-stream", MsgsPerSec: 200000}, {Peer: "grpc", Test: "server-stream", MsgsPerSec: 120000},
			{Peer: "fleet", Test: "bidi-echo", MsgsPerSec: 300000}, {Peer: "grpc", Test: "bidi-echo", MsgsPerSec: 100000},
			{Peer: "fleet", Test: "unary-idle", CallNs: 5000},
		},
	}, set: Settings{EchoConns: []int{1}, EchoCallers: []int{1, 1000}}}
	checkTargets(t, r.round3Targets(), map[string][2]string{
		"R3: serial echo, 1 connection, 1 caller: Fleet ≥ 1.3× the best of rpcx, arpc, Kitex and Kitex (mux)": {
			"arpc (best) 1.25×", "**no**"},
		"R3: echo, 1 connection, 1000 callers: Fleet ≥ 2.5× the best of rpcx, arpc, Kitex and Kitex (mux)": {
			"Kitex (mux) (best) 2.00×; rpcx 4.00×", "**no**"},
		"R3: 1 long connection, 10,000 calls (serial): Fleet ≥ 1.3× the best of rpcx, arpc, Kitex and Kitex (mux)": {
			"Fleet 1,400 vs Kitex (best) 1,000 calls/s = 1.40×; arpc 1.56×", "yes"},
		"R3: streams, server-stream: Fleet ≥ 2× gRPC": {"200,000 vs 120,000 msgs/s = 1.67×", "**no**"},
		"R3: streams, bidi-echo: Fleet ≥ 2× gRPC":     {"300,000 vs 100,000 msgs/s = 3.00×", "yes"},
		"R3: echo, 1 connection, 1000 callers: Fleet's client + server CPU per call ≤ ½ the lowest peer's": {
			"Fleet 20.0 vs Kitex (mux) (lowest) 40.0 µs/call = 0.50×", "yes"},
	})
}
