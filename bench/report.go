package bench

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fleetrpc/fleet/bench/peers"
)

// title returns a peer's display name.
func (r *runner) title(name string) string {
	if p := peers.Get(name); p != nil {
		return p.Title
	}
	return name
}

// num formats n with thousands separators.
func num(n float64) string {
	if math.IsNaN(n) || math.IsInf(n, 0) {
		return "—"
	}
	s := strconv.FormatInt(int64(math.Round(n)), 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// ms formats a duration in milliseconds with three significant digits.
func ms(d time.Duration) string {
	return sig(float64(d) / 1e6)
}

// sig formats x with about three significant digits.
func sig(x float64) string {
	switch {
	case x == 0:
		return "0"
	case x < 0.01:
		return strconv.FormatFloat(x, 'f', 4, 64)
	case x < 1:
		return strconv.FormatFloat(x, 'f', 3, 64)
	case x < 10:
		return strconv.FormatFloat(x, 'f', 2, 64)
	case x < 100:
		return strconv.FormatFloat(x, 'f', 1, 64)
	}
	return num(x)
}

// ratio formats a/b as "2.35×", or "—" when it is undefined.
func ratio(a, b float64) string {
	if a <= 0 || b <= 0 {
		return "—"
	}
	return strconv.FormatFloat(a/b, 'f', 2, 64) + "×"
}

// table is a markdown table under construction.
type table struct {
	left  int // leading text columns, left-aligned; the rest are numbers
	head  []string
	rows  [][]string
	notes []string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) note(format string, args ...any) {
	t.notes = append(t.notes, fmt.Sprintf(format, args...))
}

func (t *table) String() string {
	var b strings.Builder
	b.WriteString("| " + strings.Join(t.head, " | ") + " |\n")
	b.WriteString("|")
	for i := range t.head {
		if i < t.left {
			b.WriteString("---|")
		} else {
			b.WriteString("--:|")
		}
	}
	b.WriteString("\n")
	for _, r := range t.rows {
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
	for _, n := range t.notes {
		b.WriteString("\n" + n + "\n")
	}
	return b.String()
}

// flag marks a cell whose measurement had errors or was cut short.
func mark(s string, errors int64, capped bool) string {
	if errors > 0 {
		s += " ⚠"
	}
	if capped {
		s += " ⏱"
	}
	return s
}

// table returns the markdown table of one scenario, or "" if it has no
// results.
func (r *runner) table(scenario string) string {
	var t *table
	var heading string
	switch scenario {
	case ScenarioEcho:
		heading, t = "Scenario 1: echo of the 581-byte BenchmarkMessage", r.echoTable()
		if st := r.echoSpreadTable(); st != nil && len(st.rows) > 0 && len(t.rows) > 0 {
			return "### " + heading + fmt.Sprintf(" (median of %d rounds)", r.o.Repeat) + "\n\n" + t.String() +
				"\n### Spread of echo throughput over the rounds\n\n" + st.String()
		}
	case ScenarioMath:
		heading, t = "Scenario 2: MathService.Add", r.mathTable()
	case ScenarioLatency:
		heading, t = "Scenario 3: handler latency", r.latencyTable()
	case ScenarioLogs:
		heading, t = "Scenario 4: log shipping", r.logsTable()
	case ScenarioCodecs:
		heading, t = "Scenario 5: codecs", r.codecsTable()
	case ScenarioStreams:
		heading, t = "Scenario 6: streams", r.streamsTable()
	case ScenarioOverload:
		heading, t = "Overload: 2x the measured capacity, with and without the adaptive concurrency limit", r.overloadTable()
	}
	if t == nil || len(t.rows) == 0 {
		return ""
	}
	return "### " + heading + "\n\n" + t.String()
}

func (r *runner) echoTable() *table {
	t := &table{left: 3, head: []string{"conns", "callers", "peer", "calls/s", "mean ms", "p50 ms", "p99 ms", "p99.9 ms", "max ms", "min ms",
		"client CPU µs/call", "server CPU µs/call", "Fleet/peer calls/s", "Fleet/peer p99"}}
	capped, rounds := false, false
	for _, conns := range r.set.EchoConns {
		for _, callers := range r.set.EchoCallers {
			fleet, hasFleet := r.echoRow(peers.Fleet, conns, callers)
			for _, e := range r.rep.Echo {
				if e.Conns != conns || e.Callers != callers {
					continue
				}
				thr, p99 := "—", "—"
				if hasFleet {
					thr = ratio(fleet.Throughput, e.Throughput)
					p99 = ratio(float64(fleet.Latency.P99), float64(e.Latency.P99))
				}
				if sp, ok := r.echoSpread(e.Peer, conns, callers); ok && sp.FleetRatio > 0 {
					thr, rounds = strconv.FormatFloat(sp.FleetRatio, 'f', 2, 64)+"× ᵐ", true
				}
				e.cpuPerCall()
				t.add(strconv.Itoa(conns), num(float64(callers)), r.title(e.Peer),
					mark(num(e.Throughput), e.Errors, e.Capped),
					ms(e.Latency.Mean), ms(e.Latency.P50), ms(e.Latency.P99), ms(e.Latency.P999), ms(e.Latency.Max), ms(e.Latency.Min),
					sig(e.ClientCPUPerCall), sig(e.ServerCPUPerCall), thr, p99)
				if e.Error != "" {
					t.note("⚠ %s, %d conns, %d callers: %s", r.title(e.Peer), conns, callers, e.Error)
				}
				capped = capped || e.Capped
			}
		}
	}
	if capped {
		t.note("⏱ stopped by the %v time cap before %s calls; calls/s is over the calls made.", r.set.EchoCap, num(float64(r.set.EchoCalls)))
	}
	t.note("CPU µs/call: user + system time over the measurement (getrusage) divided by the calls, the client's in the load generator, the server's in its own process.")
	if rounds {
		t.note("ᵐ the median of the per-round ratios (Fleet and the peer measured in the same round); their range is in the table below.")
	}
	return t
}

// echoSpread returns the --repeat summary of one peer's echo row.
func (r *runner) echoSpread(peer string, conns, callers int) (EchoSpread, bool) {
	for _, s := range r.rep.EchoSpread {
		if s.Peer == peer && s.Conns == conns && s.Callers == callers {
			return s, true
		}
	}
	return EchoSpread{}, false
}

// echoSpreadTable shows, for a --repeat run, each peer's median, lowest
// and highest throughput over the rounds and the spread (max - min) /
// median.
func (r *runner) echoSpreadTable() *table {
	if len(r.rep.EchoSpread) == 0 {
		return nil
	}
	t := &table{left: 3, head: []string{"conns", "callers", "peer", "rounds", "median calls/s", "min calls/s", "max calls/s", "spread",
		"Fleet/peer median", "Fleet/peer range", "client CPU µs/call", "server CPU µs/call"}}
	for _, s := range r.rep.EchoSpread {
		med, rng := "—", "—"
		if s.FleetRatio > 0 {
			med = strconv.FormatFloat(s.FleetRatio, 'f', 2, 64) + "×"
			rng = strconv.FormatFloat(s.FleetRatioMin, 'f', 2, 64) + "–" + strconv.FormatFloat(s.FleetRatioMax, 'f', 2, 64) + "×"
		}
		t.add(strconv.Itoa(s.Conns), num(float64(s.Callers)), r.title(s.Peer), strconv.Itoa(s.Rounds),
			num(s.Median), num(s.Min), num(s.Max), fmt.Sprintf("%.1f%%", 100*s.Spread),
			med, rng, sig(s.ClientCPUPerCall), sig(s.ServerCPUPerCall))
	}
	t.note("spread = (max - min) / median of the rounds' calls/s; the rounds run the peers interleaved. Fleet/peer: Fleet's calls/s over the peer's in the same round, median and range over the rounds. CPU µs/call: median over the rounds.")
	return t
}

func (r *runner) echoRow(peer string, conns, callers int) (EchoResult, bool) {
	for _, e := range r.rep.Echo {
		if e.Peer == peer && e.Conns == conns && e.Callers == callers {
			return e, true
		}
	}
	return EchoResult{}, false
}

func (r *runner) mathTestName(m MathResult) string {
	switch m.Test {
	case "long":
		return fmt.Sprintf("1 long connection, %s calls", num(float64(m.Target)))
	case "short":
		return fmt.Sprintf("short connections (connect, call, close) × %s", num(float64(r.set.MathShort)))
	case "procs":
		return fmt.Sprintf("%d processes × %s calls", m.Procs, num(float64(r.set.MathProcCalls)))
	}
	return m.Test
}

func (r *runner) mathTable() *table {
	t := &table{left: 2, head: []string{"test", "peer", "calls", "wall s", "calls/s", "client CPU s/100k", "server CPU s/100k", "Fleet/peer calls/s"}}
	capped := false
	type key struct {
		test string
		idx  int
	}
	// Rows grouped by test, in the order the tests ran.
	var tests []key
	seen := map[key]bool{}
	longIdx := map[string]int{}
	idxOf := func(m MathResult, i int) key {
		if m.Test == "long" {
			return key{"long", i}
		}
		return key{m.Test, 0}
	}
	for _, m := range r.rep.Math {
		i := 0
		if m.Test == "long" {
			i = longIdx[m.Peer]
			longIdx[m.Peer]++
		}
		k := idxOf(m, i)
		if !seen[k] {
			seen[k] = true
			tests = append(tests, k)
		}
	}
	slices.SortStableFunc(tests, func(a, b key) int {
		order := map[string]int{"long": 0, "short": 1, "procs": 2}
		if order[a.test] != order[b.test] {
			return order[a.test] - order[b.test]
		}
		return a.idx - b.idx
	})
	for _, k := range tests {
		rows := r.mathRows(k.test, k.idx)
		var fleet *MathResult
		for i := range rows {
			if rows[i].Peer == peers.Fleet {
				fleet = &rows[i]
			}
		}
		for _, m := range rows {
			rat := "—"
			if fleet != nil {
				rat = ratio(fleet.Throughput, m.Throughput)
			}
			t.add(r.mathTestName(m), r.title(m.Peer), num(float64(m.Calls)), sig(m.Seconds),
				mark(num(m.Throughput), m.Errors, m.Capped), sig(m.ClientCPU), sig(m.ServerCPU), rat)
			if m.Error != "" {
				t.note("⚠ %s, %s: %s", r.title(m.Peer), r.mathTestName(m), m.Error)
			}
			capped = capped || m.Capped
		}
	}
	if capped {
		t.note("⏱ stopped by the %v time cap before making every call; calls/s is over the calls made.", r.set.MathCap)
	}
	return t
}

// mathRows returns the results of one test: for "long", the idx-th long
// test of each peer.
func (r *runner) mathRows(test string, idx int) []MathResult {
	var out []MathResult
	count := map[string]int{}
	for _, m := range r.rep.Math {
		if m.Test != test {
			continue
		}
		if test == "long" {
			i := count[m.Peer]
			count[m.Peer]++
			if i != idx {
				continue
			}
		}
		out = append(out, m)
	}
	return out
}

func (r *runner) latencyTable() *table {
	t := &table{left: 3, head: []string{"sleep", "callers", "peer", "calls/s", "limit calls/s", "ratio to limit", "mean ms", "p99 ms", "Fleet/peer calls/s"}}
	for _, sleep := range r.set.LatencySleeps {
		for _, callers := range r.set.LatencyCallers {
			var fleet *LatencyResult
			for i, l := range r.rep.Latency {
				if l.Peer == peers.Fleet && l.Sleep == sleep && l.Callers == callers {
					fleet = &r.rep.Latency[i]
				}
			}
			for _, l := range r.rep.Latency {
				if l.Sleep != sleep || l.Callers != callers {
					continue
				}
				rat := "—"
				if fleet != nil {
					rat = ratio(fleet.Throughput, l.Throughput)
				}
				t.add(sleepString(sleep), num(float64(callers)), r.title(l.Peer), mark(num(l.Throughput), l.Errors, false),
					num(l.Limit), strconv.FormatFloat(l.Ratio, 'f', 3, 64), ms(l.Latency.Mean), ms(l.Latency.P99), rat)
				if l.Error != "" {
					t.note("⚠ %s, sleep %s, %d callers: %s", r.title(l.Peer), sleepString(sleep), callers, l.Error)
				}
				if l.Abandoned > 0 {
					t.note("%s, sleep %s, %d callers: %d calls were still waiting when the measurement ended (not counted).", r.title(l.Peer), sleepString(sleep), callers, l.Abandoned)
				}
			}
		}
	}
	t.note("The limit is Little's law, callers / sleep, capped by the peer's own best echo throughput (%s); at 0 ms it is that cap.", r.limitSources())
	return t
}

func (r *runner) limitSources() string {
	srcs := map[string]bool{}
	for _, l := range r.rep.Latency {
		if l.Sleep == 0 {
			srcs[l.LimitSource] = true
		}
	}
	if srcs["0 ms max"] {
		return "scenario 1 did not run, so the best 0 ms throughput of this scenario"
	}
	return "its maximum in scenario 1"
}

func (r *runner) logsTable() *table {
	t := &table{left: 3, head: []string{"peer", "mode", "how", "entries/s", "MB/s", "client CPU %", "server CPU %", "Fleet/peer entries/s"}}
	fleet := map[string]float64{}
	for _, l := range r.rep.Logs {
		if l.Peer == peers.Fleet {
			fleet[l.Mode] = l.EntriesPerSec
		}
	}
	for _, l := range r.rep.Logs {
		mode := l.Mode
		if mode == LogOnewayZstd && l.Peer != peers.Fleet {
			mode = LogOneway
		}
		rat := ratio(fleet[mode], l.EntriesPerSec)
		t.add(r.title(l.Peer), l.Mode, l.How, mark(num(l.EntriesPerSec), l.Errors, false), sig(l.MBPerSec),
			sig(l.ClientCPUPct), sig(l.ServerCPUPct), rat)
		if l.Error != "" {
			t.note("⚠ %s %s: %s", r.title(l.Peer), l.Mode, l.Error)
		}
	}
	t.note("Batches of %d entries (a %d-byte nginx access-log line and a hostname, %d bytes of payload each), %d senders on one connection for %v; MB/s counts log payload (10^6 bytes), not wire bytes; oneway entries are counted as the server receives them. The ratio compares with Fleet in the same mode (acknowledged or oneway).",
		peers.LogBatchSize, len(peers.LogLine), peers.LogEntryBytes, r.set.LogSenders, r.set.LogDuration)
	return t
}

func (r *runner) codecsTable() *table {
	t := &table{left: 3, head: []string{"owner", "codec", "value", "bytes", "marshal ns/op", "B/op", "allocs/op", "unmarshal ns/op", "B/op", "allocs/op", "Fleet protobuf speed ÷ this"}}
	var fleetNs float64
	for _, c := range r.rep.Codecs {
		if c.Owner == peers.Fleet && strings.HasPrefix(c.Codec, "protobuf") && c.Error == "" {
			fleetNs = c.MarshalNs + c.UnmarshalNs
		}
	}
	for _, c := range r.rep.Codecs {
		if c.Error != "" {
			t.add(r.title(c.Owner), c.Codec, c.Value, "—", "—", "—", "—", "—", "—", "—", "—")
			t.note("⚠ %s %s: %s", r.title(c.Owner), c.Codec, c.Error)
			continue
		}
		t.add(r.title(c.Owner), c.Codec, c.Value, strconv.Itoa(c.Size),
			sig(c.MarshalNs), num(float64(c.MarshalBytes)), num(float64(c.MarshalAllocs)),
			sig(c.UnmarshalNs), num(float64(c.UnmarshalBytes)), num(float64(c.UnmarshalAllocs)),
			ratio(c.MarshalNs+c.UnmarshalNs, fleetNs))
	}
	t.note("testing.Benchmark in the bench process, benchtime %v. Fleet's codecs marshal with codec.MarshalAppend into a reused buffer when they implement codec.Appender, as Fleet's hot path does; gRPC's marshal includes freeing its pooled buffer. The last column is (this codec's marshal + unmarshal time) ÷ (Fleet protobuf's).", r.set.CodecTime)
	return t
}

// target is one of the performance targets, checked against the results.
type target struct {
	what, figure string
	met          string // "yes", "no" or "n/a"
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

func (r *runner) targets() []target {
	var ts []target
	for _, callers := range []int{100, 1000} {
		ts = append(ts, r.echoVsTargets("1", peers.GRPC, "gRPC", callers, 3)...)
		f, ok1 := r.echoRow(peers.Fleet, 1, callers)
		raw, ok3 := r.echoRow(peers.Raw, 1, callers)
		if ok1 && ok3 {
			ts = append(ts, target{
				what:   fmt.Sprintf("1: echo, 1 connection, %d callers: Fleet / raw ceiling (reported)", callers),
				figure: fmt.Sprintf("%s vs %s calls/s = %.2f×", num(f.Throughput), num(raw.Throughput), f.Throughput/raw.Throughput),
				met:    "n/a",
			})
		}
	}
	for _, test := range []string{"short", "procs"} {
		rows := r.mathRows(test, 0)
		var f, g *MathResult
		for i := range rows {
			switch rows[i].Peer {
			case peers.Fleet:
				f = &rows[i]
			case peers.GRPC:
				g = &rows[i]
			}
		}
		if f == nil || g == nil {
			continue
		}
		want := 1.5
		if test == "procs" {
			want = 3
		}
		rt := f.Throughput / g.Throughput
		ts = append(ts, target{
			what:   fmt.Sprintf("2: %s: Fleet ≥ %.1f× gRPC", r.mathTestName(*f), want),
			figure: fmt.Sprintf("%s vs %s calls/s = %.2f×", num(f.Throughput), num(g.Throughput), rt),
			met:    yesNo(rt >= want),
		})
	}
	for _, l := range r.rep.Latency {
		if l.Peer != peers.Fleet || l.Sleep == 0 {
			continue
		}
		ts = append(ts, target{
			what:   fmt.Sprintf("3: sleep %s, %d callers: Fleet ≥ 0.9 of the limit", sleepString(l.Sleep), l.Callers),
			figure: fmt.Sprintf("%s of %s calls/s = %.3f", num(l.Throughput), num(l.Limit), l.Ratio),
			met:    yesNo(l.Ratio >= 0.9),
		})
	}
	logRate := func(peer, mode string) (float64, bool) {
		for _, l := range r.rep.Logs {
			if l.Peer == peer && l.Mode == mode {
				return l.EntriesPerSec, true
			}
		}
		return 0, false
	}
	if f, ok := logRate(peers.Fleet, LogOneway); ok {
		if g, ok := logRate(peers.GobStream, LogOneway); ok {
			ts = append(ts, target{
				what:   "4: Fleet oneway entries/s ≥ raw gob stream's",
				figure: fmt.Sprintf("%s vs %s entries/s = %.2f×", num(f), num(g), f/g),
				met:    yesNo(f >= g),
			})
		}
	}
	if f, ok := logRate(peers.Fleet, LogAck); ok {
		if th, ok := logRate(peers.Thrift, LogAck); ok {
			ts = append(ts, target{
				what:   "4: Fleet acknowledged entries/s ≥ 3× Thrift's",
				figure: fmt.Sprintf("%s vs %s entries/s = %.2f×", num(f), num(th), f/th),
				met:    yesNo(f >= 3*th),
			})
		}
	}
	ts = append(ts, r.round2Targets()...)
	return append(ts, r.round3Targets()...)
}

// echoVsTargets are the two echo targets against peer (called title) at 1
// connection and callers, prefixed by tag: Fleet's calls/s at least want×
// the peer's, and its p99 at most half the peer's. None when either row
// is missing.
func (r *runner) echoVsTargets(tag, peer, title string, callers int, want float64) []target {
	f, ok1 := r.echoRow(peers.Fleet, 1, callers)
	g, ok2 := r.echoRow(peer, 1, callers)
	if !ok1 || !ok2 {
		return nil
	}
	thr := f.Throughput / g.Throughput
	p99 := float64(f.Latency.P99) / float64(g.Latency.P99)
	return []target{{
		what:   fmt.Sprintf("%s: echo, 1 connection, %d callers: Fleet ≥ %g× %s calls/s", tag, callers, want, title),
		figure: fmt.Sprintf("%s vs %s calls/s = %.2f×", num(f.Throughput), num(g.Throughput), thr),
		met:    yesNo(thr >= want),
	}, {
		what:   fmt.Sprintf("%s: echo, 1 connection, %d callers: Fleet p99 ≤ ½ %s's", tag, callers, title),
		figure: fmt.Sprintf("%s ms vs %s ms = %.2f×", ms(f.Latency.P99), ms(g.Latency.P99), p99),
		met:    yesNo(p99 <= 0.5),
	}}
}

// round2Targets are the targets of the second performance round (rpcx in
// the same run, the raw ceiling, serial calls, stability) and the cost of
// observability (the fleet-obs variant), for the peers this run measured.
func (r *runner) round2Targets() []target {
	var ts []target
	for _, callers := range []int{100, 1000} {
		ts = append(ts, r.echoVsTargets("R2", peers.RPCX, "rpcx", callers, 2.5)...)
	}
	if f, ok := r.echoRow(peers.Fleet, 1, 100); ok {
		if raw, ok := r.echoRow(peers.Raw, 1, 100); ok {
			rt := f.Throughput / raw.Throughput
			ts = append(ts, target{
				what:   "R2: echo, 1 connection, 100 callers: Fleet ≥ 0.6× the raw TCP echo",
				figure: fmt.Sprintf("%s vs %s calls/s = %.2f×", num(f.Throughput), num(raw.Throughput), rt),
				met:    yesNo(rt >= 0.6),
			})
		}
		if o, ok := r.echoRow(peers.FleetObserved, 1, 100); ok {
			cost := 1 - o.Throughput/f.Throughput
			ts = append(ts, target{
				what:   "Observability: echo, 1 connection, 100 callers: metrics + tracing cost ≤ 10% of Fleet's calls/s",
				figure: fmt.Sprintf("%s vs %s calls/s = %.1f%% less", num(o.Throughput), num(f.Throughput), 100*cost),
				met:    yesNo(cost <= 0.10),
			})
		}
	}
	for _, s := range r.rep.EchoSpread {
		if s.Peer == peers.Fleet && s.Callers == 100 {
			ts = append(ts, target{
				what:   fmt.Sprintf("R2: echo, %d connection(s), 100 callers: Fleet's spread over %d rounds ≤ 15%%", s.Conns, s.Rounds),
				figure: fmt.Sprintf("%s to %s calls/s, median %s = %.1f%%", num(s.Min), num(s.Max), num(s.Median), 100*s.Spread),
				met:    yesNo(s.Spread <= 0.15),
			})
		}
	}
	long := r.mathRows("long", 0)
	var f, n, th *MathResult
	for i := range long {
		switch long[i].Peer {
		case peers.Fleet:
			f = &long[i]
		case peers.NetRPC:
			n = &long[i]
		case peers.Thrift:
			th = &long[i]
		}
	}
	if f != nil && n != nil {
		rt := f.Throughput / n.Throughput
		ts = append(ts, target{
			what:   fmt.Sprintf("R2: %s: Fleet ≥ 1.2× net/rpc", r.mathTestName(*f)),
			figure: fmt.Sprintf("%s vs %s calls/s = %.2f×", num(f.Throughput), num(n.Throughput), rt),
			met:    yesNo(rt >= 1.2),
		})
	}
	if f != nil && th != nil {
		rt := f.Throughput / th.Throughput
		ts = append(ts, target{
			what:   fmt.Sprintf("R2: %s: Fleet ≥ Thrift", r.mathTestName(*f)),
			figure: fmt.Sprintf("%s vs %s calls/s = %.2f×", num(f.Throughput), num(th.Throughput), rt),
			met:    yesNo(rt >= 1),
		})
	}
	for _, l := range r.rep.Latency {
		if l.Peer == peers.Fleet && l.Sleep == 10*time.Millisecond && l.Callers == 1000 {
			ts = append(ts, target{
				what:   "R2: sleep 10 ms, 1000 callers: Fleet ≥ 0.8 of the limit",
				figure: fmt.Sprintf("%s of %s calls/s = %.3f", num(l.Throughput), num(l.Limit), l.Ratio),
				met:    yesNo(l.Ratio >= 0.8),
			})
		}
	}
	return ts
}

// sleepString formats a handler sleep in milliseconds.
func sleepString(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/1e6, 'f', -1, 64) + " ms"
}
