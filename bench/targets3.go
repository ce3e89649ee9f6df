package bench

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/fleetrpc/fleet/bench/peers"
)

// Round-3 targets (issue 27): against the strongest Go peers measured in
// the same run. Echo figures are the median of the per-round ratios when
// the run had rounds (--repeat), else the single run's ratio.

// r3Peers are the Go frameworks Fleet's echo and serial calls are compared
// with in round 3; the best of those measured is the one Fleet leads least.
var r3Peers = []string{peers.RPCX, peers.ARPC, peers.Kitex, peers.KitexMux}

// r3CPUPeers are the peers whose lowest client + server CPU per call
// Fleet's is compared with.
var r3CPUPeers = []string{peers.RPCX, peers.ARPC, peers.Kitex, peers.KitexMux, peers.GRPC}

// echoRatio is a's calls/s over b's in scenario 1 at 1 connection.
type echoRatio struct {
	med, lo, hi float64 // median, lowest and highest ratio; all equal without rounds
	rounds      int     // rounds the ratio was taken over; 0 for a single run
}

// String formats the ratio as "2.97×", with " (rounds 2.80–3.10×, median
// of 3)" when it came from rounds.
func (e echoRatio) String() string {
	s := x2(e.med)
	if e.rounds > 0 {
		s += fmt.Sprintf(" (rounds %.2f–%s, median of %d)", e.lo, x2(e.hi), e.rounds)
	}
	return s
}

func x2(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) + "×" }

// echoRatioOf returns a's echo calls/s over b's at 1 connection and
// callers: with rounds, the median and range of the ratios of the rounds
// in which both were measured without errors; else the ratio of the
// single run's rows. ok is false when either was not measured.
func (r *runner) echoRatioOf(a, b string, callers int) (echoRatio, bool) {
	if len(r.rep.EchoRounds) > 0 {
		thr := map[[2]int]float64{} // {round, 0 for a / 1 for b}
		for _, e := range r.rep.EchoRounds {
			if e.Conns != 1 || e.Callers != callers || e.Errors > 0 || e.Throughput <= 0 {
				continue
			}
			switch e.Peer {
			case a:
				thr[[2]int{e.Round, 0}] = e.Throughput
			case b:
				thr[[2]int{e.Round, 1}] = e.Throughput
			}
		}
		var ratios []float64
		for k, ta := range thr {
			if k[1] != 0 {
				continue
			}
			if tb, ok := thr[[2]int{k[0], 1}]; ok {
				ratios = append(ratios, ta/tb)
			}
		}
		if len(ratios) == 0 {
			return echoRatio{}, false
		}
		return echoRatio{med: median(ratios), lo: slices.Min(ratios), hi: slices.Max(ratios), rounds: len(ratios)}, true
	}
	ea, ok1 := r.echoRow(a, 1, callers)
	eb, ok2 := r.echoRow(b, 1, callers)
	if !ok1 || !ok2 || ea.Throughput <= 0 || eb.Throughput <= 0 {
		return echoRatio{}, false
	}
	q := ea.Throughput / eb.Throughput
	return echoRatio{med: q, lo: q, hi: q}, true
}

// echoCPU returns a peer's client + server CPU µs per call at 1 connection
// and callers: the medians over the rounds when the run had rounds.
func (r *runner) echoCPU(peer string, callers int) (float64, bool) {
	if s, ok := r.echoSpread(peer, 1, callers); ok {
		c := s.ClientCPUPerCall + s.ServerCPUPerCall
		return c, c > 0
	}
	e, ok := r.echoRow(peer, 1, callers)
	if !ok || e.Errors > 0 {
		return 0, false
	}
	e.cpuPerCall()
	c := e.ClientCPUPerCall + e.ServerCPUPerCall
	return c, c > 0
}

// round3Targets are the targets of issue 27, for the peers this run
// measured.
func (r *runner) round3Targets() []target {
	var ts []target
	callers := []int{100, 1000}
	// Echo against the best Go framework; serial echo when the run has a
	// 1-caller row.
	echoCallers := callers
	if slices.Contains(r.set.EchoCallers, 1) {
		echoCallers = append([]int{1}, callers...)
	}
	for _, c := range echoCallers {
		want, what := 2.5, fmt.Sprintf("R3: echo, 1 connection, %d callers: Fleet ≥ 2.5× the best of %s", c, r.r3PeerList())
		if c == 1 {
			want, what = 1.3, fmt.Sprintf("R3: serial echo, 1 connection, 1 caller: Fleet ≥ 1.3× the best of %s", r.r3PeerList())
		}
		if t, ok := r.bestEchoTarget(what, c, want); ok {
			ts = append(ts, t)
		}
	}
	ts = append(ts, r.serialTargets()...)
	for _, c := range callers {
		if q, ok := r.echoRatioOf(peers.FleetObserved, peers.Fleet, c); ok {
			ts = append(ts, target{
				what:   fmt.Sprintf("R3: echo, 1 connection, %d callers: Fleet with metrics + tracing ≥ 0.95× plain Fleet", c),
				figure: fmt.Sprintf("%s = %.1f%% less", q, 100*(1-q.med)),
				met:    yesNo(q.med >= 0.95),
			})
		}
	}
	for _, c := range callers {
		if q, ok := r.echoRatioOf(peers.FleetGRPC, peers.GRPC, c); ok {
			ts = append(ts, target{
				what:   fmt.Sprintf("R3: echo, 1 connection, %d callers: gRPC client through Fleet's gateway ≥ 1.2× grpc-go's server", c),
				figure: q.String(),
				met:    yesNo(q.med >= 1.2),
			})
		}
	}
	for _, test := range []string{"server-stream", "bidi-echo"} {
		f, ok1 := r.streamRate(peers.Fleet, test)
		g, ok2 := r.streamRate(peers.GRPC, test)
		if !ok1 || !ok2 {
			continue
		}
		ts = append(ts, target{
			what:   fmt.Sprintf("R3: streams, %s: Fleet ≥ 2× gRPC", test),
			figure: fmt.Sprintf("%s vs %s msgs/s = %s", num(f), num(g), x2(f/g)),
			met:    yesNo(f/g >= 2),
		})
	}
	if q, ok := r.echoRatioOf(peers.Fleet, peers.Raw, 100); ok {
		ts = append(ts, target{
			what:   "R3: echo, 1 connection, 100 callers: Fleet ≥ 0.65× the raw TCP echo",
			figure: q.String(),
			met:    yesNo(q.med >= 0.65),
		})
	}
	for _, c := range callers {
		if t, ok := r.cpuTarget(c); ok {
			ts = append(ts, t)
		}
	}
	return ts
}

// r3PeerList names the round-3 peers, "rpcx, arpc, Kitex and Kitex-mux".
func (r *runner) r3PeerList() string {
	var ss []string
	for _, p := range r3Peers {
		ss = append(ss, r.title(p))
	}
	return joinStrings(ss)
}

// bestEchoTarget compares Fleet at 1 connection and callers with the
// round-3 peer it leads least (lowest median ratio); the figure names it
// and lists the others.
func (r *runner) bestEchoTarget(what string, callers int, want float64) (target, bool) {
	best, bestQ := "", echoRatio{}
	var others []string
	for _, p := range r3Peers {
		q, ok := r.echoRatioOf(peers.Fleet, p, callers)
		if !ok {
			continue
		}
		if best == "" || q.med < bestQ.med {
			if best != "" {
				others = append(others, r.title(best)+" "+x2(bestQ.med))
			}
			best, bestQ = p, q
			continue
		}
		others = append(others, r.title(p)+" "+x2(q.med))
	}
	if best == "" {
		return target{}, false
	}
	fig := fmt.Sprintf("%s (best) %s", r.title(best), bestQ)
	if len(others) > 0 {
		fig += "; " + strings.Join(others, ", ")
	}
	return target{what: what, figure: fig, met: yesNo(bestQ.med >= want)}, true
}

// serialTargets compare Fleet's serial MathService.Add calls on one long
// connection with the best round-3 peer, one target per long test.
func (r *runner) serialTargets() []target {
	var ts []target
	for idx := 0; ; idx++ {
		rows := r.mathRows("long", idx)
		if len(rows) == 0 {
			return ts
		}
		var f *MathResult
		for i := range rows {
			if rows[i].Peer == peers.Fleet && rows[i].Errors == 0 && rows[i].Throughput > 0 {
				f = &rows[i]
			}
		}
		if f == nil {
			continue
		}
		var best *MathResult
		var others []string
		for _, p := range r3Peers {
			for i := range rows {
				m := &rows[i]
				if m.Peer != p || m.Errors > 0 || m.Throughput <= 0 {
					continue
				}
				if best == nil || m.Throughput > best.Throughput {
					if best != nil {
						others = append(others, r.title(best.Peer)+" "+x2(f.Throughput/best.Throughput))
					}
					best = m
					continue
				}
				others = append(others, r.title(m.Peer)+" "+x2(f.Throughput/m.Throughput))
			}
		}
		if best == nil {
			continue
		}
		q := f.Throughput / best.Throughput
		fig := fmt.Sprintf("Fleet %s vs %s (best) %s calls/s = %s", num(f.Throughput), r.title(best.Peer), num(best.Throughput), x2(q))
		if len(others) > 0 {
			fig += "; " + strings.Join(others, ", ")
		}
		ts = append(ts, target{
			what:   fmt.Sprintf("R3: %s (serial): Fleet ≥ 1.3× the best of %s", r.mathTestName(*f), r.r3PeerList()),
			figure: fig,
			met:    yesNo(q >= 1.3),
		})
	}
}

// streamRate returns a peer's msgs/s in one stream test of scenario 6.
func (r *runner) streamRate(peer, test string) (float64, bool) {
	for _, s := range r.rep.Streams {
		if s.Peer == peer && s.Test == test && s.Error == "" && s.MsgsPerSec > 0 {
			return s.MsgsPerSec, true
		}
	}
	return 0, false
}

// cpuTarget compares Fleet's client + server CPU per call at 1 connection
// and callers with the lowest of the r3CPUPeers measured.
func (r *runner) cpuTarget(callers int) (target, bool) {
	f, ok := r.echoCPU(peers.Fleet, callers)
	if !ok {
		return target{}, false
	}
	best, bestCPU := "", 0.0
	for _, p := range r3CPUPeers {
		if c, ok := r.echoCPU(p, callers); ok && (best == "" || c < bestCPU) {
			best, bestCPU = p, c
		}
	}
	if best == "" {
		return target{}, false
	}
	return target{
		what:   fmt.Sprintf("R3: echo, 1 connection, %d callers: Fleet's client + server CPU per call ≤ ½ the lowest peer's", callers),
		figure: fmt.Sprintf("Fleet %s vs %s (lowest) %s µs/call = %s", sig(f), r.title(best), sig(bestCPU), x2(f/bestCPU)),
		met:    yesNo(f <= bestCPU/2),
	}, true
}
