package bench

import (
	"math"
	"testing"
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
