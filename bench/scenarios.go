package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fleetrpc/fleet/bench/peers"
)

// EchoResult is one measurement of scenario 1.
type EchoResult struct {
	Peer       string  `json:"peer"`
	Round      int     `json:"round,omitempty"` // 1-based round of a --repeat run; 0 in a single run
	Conns      int     `json:"conns"`
	Callers    int     `json:"callers"`
	Calls      int64   `json:"calls"`
	Errors     int64   `json:"errors"`
	Abandoned  int64   `json:"abandoned,omitempty"`
	Error      string  `json:"error,omitempty"`
	Capped     bool    `json:"capped,omitempty"` // stopped by the time cap before the call count
	Seconds    float64 `json:"seconds"`
	Throughput float64 `json:"calls_per_sec"`
	Latency    Latency `json:"latency"`
	// ClientCPU and ServerCPU are CPU seconds per 100,000 calls.
	ClientCPU float64 `json:"client_cpu_s_per_100k"`
	ServerCPU float64 `json:"server_cpu_s_per_100k"`
	// ClientCPUPerCall and ServerCPUPerCall are the same in microseconds
	// per call: the client's is this process's getrusage (user + system)
	// delta over the measurement, the server's the server child's own
	// getrusage delta, asked over its stdin before and after.
	ClientCPUPerCall float64 `json:"client_cpu_us_per_call"`
	ServerCPUPerCall float64 `json:"server_cpu_us_per_call"`
}

// cpuPerCall fills in the microseconds-per-call figures from the seconds
// per 100,000 calls (JSON written before they existed has only those).
func (e *EchoResult) cpuPerCall() {
	if e.ClientCPUPerCall == 0 {
		e.ClientCPUPerCall = e.ClientCPU * 10
	}
	if e.ServerCPUPerCall == 0 {
		e.ServerCPUPerCall = e.ServerCPU * 10
	}
}

// MathResult is one measurement of scenario 2.
type MathResult struct {
	Peer       string  `json:"peer"`
	Test       string  `json:"test"` // "long", "short" or "procs"
	Procs      int     `json:"procs"`
	Target     int64   `json:"target_calls"` // calls planned (all processes together)
	Calls      int64   `json:"calls"`        // calls made
	Errors     int64   `json:"errors"`
	Error      string  `json:"error,omitempty"`
	Capped     bool    `json:"capped,omitempty"`
	Seconds    float64 `json:"seconds"`
	Throughput float64 `json:"calls_per_sec"`
	ClientCPU  float64 `json:"client_cpu_s_per_100k"`
	ServerCPU  float64 `json:"server_cpu_s_per_100k"`
}

// LatencyResult is one measurement of scenario 3.
type LatencyResult struct {
	Peer       string        `json:"peer"`
	Sleep      time.Duration `json:"sleep_ns"`
	Callers    int           `json:"callers"`
	Calls      int64         `json:"calls"`
	Errors     int64         `json:"errors"`
	Abandoned  int64         `json:"abandoned,omitempty"`
	Error      string        `json:"error,omitempty"`
	Seconds    float64       `json:"seconds"`
	Throughput float64       `json:"calls_per_sec"`
	// Limit is Little's law: callers / sleep, capped by the peer's
	// best echo throughput (scenario 1, or the 0 ms rows when scenario 1
	// did not run).
	Limit       float64 `json:"limit_calls_per_sec"`
	LimitSource string  `json:"limit_source"`
	Ratio       float64 `json:"ratio_to_limit"`
	Latency     Latency `json:"latency"`
}

// LogResult is one measurement of scenario 4.
type LogResult struct {
	Peer          string  `json:"peer"`
	Mode          string  `json:"mode"` // "ack", "oneway" or "oneway+zstd"
	How           string  `json:"how"`
	Senders       int     `json:"senders"`
	Batches       int64   `json:"batches"`
	Entries       int64   `json:"entries"`
	Errors        int64   `json:"errors"`
	Error         string  `json:"error,omitempty"`
	Seconds       float64 `json:"seconds"`
	EntriesPerSec float64 `json:"entries_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"` // log payload (hostname + line), 10^6 bytes
	ClientCPUPct  float64 `json:"client_cpu_pct"`
	ServerCPUPct  float64 `json:"server_cpu_pct"`
}

// Log shipping modes.
const (
	LogAck        = "ack"
	LogOneway     = "oneway"
	LogOnewayZstd = "oneway+zstd"
)

// measured is a load result with the CPU both sides used during it.
type measured struct {
	loadResult
	clientCPU, serverCPU time.Duration
	received             int64 // log entries the server received during it
}

func (r *runner) measure(ctx context.Context, srv *serverProc, l load, op func(context.Context, int64) error) (measured, error) {
	runtime.GC()
	scpu0, recv0, err := srv.stats()
	if err != nil {
		return measured{}, err
	}
	ccpu0 := cpuTime()
	res := l.run(ctx, r.prog, op)
	ccpu1 := cpuTime()
	scpu1, recv1, err := srv.stats()
	if err != nil {
		return measured{}, err
	}
	return measured{loadResult: res, clientCPU: ccpu1 - ccpu0, serverCPU: scpu1 - scpu0, received: recv1 - recv0}, nil
}

// per100k converts a CPU time to seconds per 100,000 calls.
func per100k(cpu time.Duration, calls int64) float64 {
	if calls <= 0 {
		return 0
	}
	return cpu.Seconds() / float64(calls) * 100000
}

// perCallMicros converts a CPU time to microseconds per call.
func perCallMicros(cpu time.Duration, calls int64) float64 {
	if calls <= 0 {
		return 0
	}
	return float64(cpu.Nanoseconds()) / 1e3 / float64(calls)
}

func echoOp(c peers.Client) func(context.Context, int64) error {
	return func(ctx context.Context, _ int64) error { return c.Echo(ctx) }
}

func addOp(c peers.Client) func(context.Context, int64) error {
	return func(ctx context.Context, i int64) error {
		a := int32(i)
		x, err := c.Add(ctx, a, 7)
		if err == nil && x != a+7 {
			err = fmt.Errorf("Add(%d, 7) = %d", a, x)
		}
		return err
	}
}

// echo runs scenario 1: the 581-byte echo at each number of connections and
// concurrent callers.
//
// With Options.Repeat > 1 it runs every peer that many rounds, the peers
// interleaved within each round so that a drift in the machine's speed
// touches all of them alike; every round's figures go to Report.EchoRounds
// and Report.Echo keeps, per peer, connections and callers, the round with
// the median throughput.
func (r *runner) echo(ctx context.Context) error {
	var errs []error
	rounds := max(r.o.Repeat, 1)
	for round := 1; round <= rounds; round++ {
		r.round = round
		if rounds == 1 {
			r.round = 0
		}
		for _, p := range r.peers {
			if !p.Has(peers.OpEcho) {
				continue
			}
			if ctx.Err() != nil {
				return errors.Join(append(errs, ctx.Err())...)
			}
			if err := r.echoPeer(ctx, p); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", p.Name, err))
			}
		}
	}
	if rounds > 1 {
		r.rep.EchoRounds = r.rep.Echo
		r.rep.Echo = medianRounds(r.rep.EchoRounds)
		r.rep.EchoSpread = r.echoSpreads()
	}
	return errors.Join(errs...)
}

// medianRounds keeps, for each peer, connection count and caller count, the
// round whose throughput is the median of the rounds (the lower median for
// an even count), in the order the keys first appear.
func medianRounds(all []EchoResult) []EchoResult {
	type key struct {
		peer           string
		conns, callers int
	}
	var order []key
	groups := map[key][]EchoResult{}
	for _, e := range all {
		k := key{e.Peer, e.Conns, e.Callers}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], e)
	}
	out := make([]EchoResult, 0, len(order))
	for _, k := range order {
		g := slices.Clone(groups[k])
		slices.SortFunc(g, func(a, b EchoResult) int { return cmp.Compare(a.Throughput, b.Throughput) })
		out = append(out, g[(len(g)-1)/2])
	}
	return out
}

// EchoSpread summarizes one peer's echo throughput over the rounds of a
// --repeat run.
type EchoSpread struct {
	Peer    string `json:"peer"`
	Conns   int    `json:"conns"`
	Callers int    `json:"callers"`
	Rounds  int    `json:"rounds"`
	// Median, Min and Max are calls per second.
	Median float64 `json:"median_calls_per_sec"`
	Min    float64 `json:"min_calls_per_sec"`
	Max    float64 `json:"max_calls_per_sec"`
	// Spread is (Max - Min) / Median, as a fraction.
	Spread float64 `json:"spread"`
	// FleetRatio is Fleet's calls/s divided by this peer's, round by round
	// (both measured in the same round, interleaved): the median, lowest
	// and highest of those per-round ratios. Zero when Fleet was not
	// measured with the same connections and callers, and 1 for Fleet.
	FleetRatio    float64 `json:"fleet_ratio_median,omitempty"`
	FleetRatioMin float64 `json:"fleet_ratio_min,omitempty"`
	FleetRatioMax float64 `json:"fleet_ratio_max,omitempty"`
	// ClientCPUPerCall and ServerCPUPerCall are the medians over the rounds
	// of the CPU microseconds per call.
	ClientCPUPerCall float64 `json:"client_cpu_us_per_call"`
	ServerCPUPerCall float64 `json:"server_cpu_us_per_call"`
}

// echoSpreads computes the spread of every peer's figures in EchoRounds
// and the per-round ratios of Fleet's calls/s to each peer's.
func (r *runner) echoSpreads() []EchoSpread {
	type key struct {
		conns, callers, round int
	}
	fleet := map[key]float64{}
	for _, e := range r.rep.EchoRounds {
		if e.Peer == peers.Fleet && e.Errors == 0 {
			fleet[key{e.Conns, e.Callers, e.Round}] = e.Throughput
		}
	}
	var out []EchoSpread
	for _, m := range r.rep.Echo {
		s := EchoSpread{Peer: m.Peer, Conns: m.Conns, Callers: m.Callers, Median: m.Throughput, Min: math.Inf(1)}
		var ratios, ccpu, scpu []float64
		for _, e := range r.rep.EchoRounds {
			if e.Peer != m.Peer || e.Conns != m.Conns || e.Callers != m.Callers {
				continue
			}
			s.Rounds++
			s.Min = min(s.Min, e.Throughput)
			s.Max = max(s.Max, e.Throughput)
			e.cpuPerCall()
			ccpu = append(ccpu, e.ClientCPUPerCall)
			scpu = append(scpu, e.ServerCPUPerCall)
			if f, ok := fleet[key{e.Conns, e.Callers, e.Round}]; ok && e.Throughput > 0 && e.Errors == 0 {
				ratios = append(ratios, f/e.Throughput)
			}
		}
		if s.Rounds < 2 {
			continue
		}
		if s.Median > 0 {
			s.Spread = (s.Max - s.Min) / s.Median
		}
		s.ClientCPUPerCall, s.ServerCPUPerCall = median(ccpu), median(scpu)
		if len(ratios) > 0 {
			s.FleetRatio = median(ratios)
			s.FleetRatioMin, s.FleetRatioMax = slices.Min(ratios), slices.Max(ratios)
		}
		out = append(out, s)
	}
	return out
}

// median returns the median of xs (the mean of the middle two for an even
// count), or 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	xs = slices.Clone(xs)
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

func (r *runner) echoPeer(ctx context.Context, p *peers.Peer) error {
	r.prog.note(fmt.Sprintf("echo %s: starting server", p.Name))
	srv, err := r.server(p, 0)
	if err != nil {
		return err
	}
	defer srv.stop()
	s := r.set
	for _, conns := range s.EchoConns {
		c, err := p.Dial(ctx, srv.addr, peers.ClientOptions{Conns: conns})
		if err != nil {
			return err
		}
		for _, callers := range s.EchoCallers {
			label := fmt.Sprintf("echo %s conns=%d callers=%d", p.Name, conns, callers)
			load{callers: callers, total: s.EchoWarmup, duration: s.WarmupCap, grace: 10 * time.Second, label: label + " warm-up"}.
				run(ctx, r.prog, echoOp(c))
			m, err := r.measure(ctx, srv, load{
				callers: callers, total: s.EchoCalls, duration: s.EchoCap, grace: 30 * time.Second,
				latency: true, label: label,
			}, echoOp(c))
			if err != nil {
				c.Close()
				return err
			}
			r.rep.Echo = append(r.rep.Echo, EchoResult{
				Peer: p.Name, Round: r.round, Conns: conns, Callers: callers,
				Calls: m.calls, Errors: m.errors, Abandoned: m.abandoned, Error: m.errString(), Capped: m.capped,
				Seconds: m.elapsed.Seconds(), Throughput: m.throughput(), Latency: summarize(m.samples),
				ClientCPU: per100k(m.clientCPU, m.calls), ServerCPU: per100k(m.serverCPU, m.calls),
				ClientCPUPerCall: perCallMicros(m.clientCPU, m.calls), ServerCPUPerCall: perCallMicros(m.serverCPU, m.calls),
			})
			if ctx.Err() != nil {
				c.Close()
				return ctx.Err()
			}
		}
		c.Close()
	}
	return nil
}

// math runs scenario 2: MathService.Add on one long connection, on short
// connections, and from several client processes at once.
func (r *runner) math(ctx context.Context) error {
	var errs []error
	for _, p := range r.peers {
		if !p.Has(peers.OpAdd) {
			continue
		}
		if ctx.Err() != nil {
			return errors.Join(append(errs, ctx.Err())...)
		}
		if err := r.mathPeer(ctx, p); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.Name, err))
		}
	}
	return errors.Join(errs...)
}

func (r *runner) mathPeer(ctx context.Context, p *peers.Peer) error {
	r.prog.note(fmt.Sprintf("math %s: starting server", p.Name))
	srv, err := r.server(p, 0)
	if err != nil {
		return err
	}
	defer srv.stop()
	s := r.set
	add := func(m measured, test string, procs int, target int64) {
		r.rep.Math = append(r.rep.Math, MathResult{
			Peer: p.Name, Test: test, Procs: procs, Target: target,
			Calls: m.calls, Errors: m.errors, Error: m.errString(), Capped: m.capped,
			Seconds: m.elapsed.Seconds(), Throughput: m.throughput(),
			ClientCPU: per100k(m.clientCPU, m.calls), ServerCPU: per100k(m.serverCPU, m.calls),
		})
	}

	// One caller on one long connection.
	c, err := p.Dial(ctx, srv.addr, peers.ClientOptions{Conns: 1})
	if err != nil {
		return err
	}
	for _, n := range s.MathLong {
		label := fmt.Sprintf("math %s long connection, %d calls", p.Name, n)
		load{callers: 1, total: min(n/10, 1000), duration: s.WarmupCap, label: label + " warm-up"}.run(ctx, r.prog, addOp(c))
		m, err := r.measure(ctx, srv, load{callers: 1, total: n, duration: s.MathCap, label: label}, addOp(c))
		if err != nil {
			c.Close()
			return err
		}
		add(m, "long", 1, n)
	}
	c.Close()

	// Short connections: connect, one call, close.
	label := fmt.Sprintf("math %s short connections, %d calls", p.Name, s.MathShort)
	m, err := r.measure(ctx, srv, load{callers: 1, total: s.MathShort, duration: s.MathCap, label: label},
		func(ctx context.Context, i int64) error {
			c, err := p.Dial(ctx, srv.addr, peers.ClientOptions{Conns: 1})
			if err != nil {
				return err
			}
			defer c.Close()
			return addOp(c)(ctx, i)
		})
	if err != nil {
		return err
	}
	add(m, "short", 1, s.MathShort)

	// Several client processes, each one caller on one long connection.
	m, err = r.mathProcs(ctx, p, srv)
	if err != nil {
		return err
	}
	add(m, "procs", s.MathProcs, int64(s.MathProcs)*s.MathProcCalls)
	return nil
}

func (r *runner) mathProcs(ctx context.Context, p *peers.Peer, srv *serverProc) (measured, error) {
	s := r.set
	r.prog.note(fmt.Sprintf("math %s %d client processes × %d calls", p.Name, s.MathProcs, s.MathProcCalls))
	var kids []*child
	defer func() {
		for _, k := range kids {
			k.stop()
		}
	}()
	for i := range s.MathProcs {
		k, err := startChild(r.o.Launch, fmt.Sprintf("bench-client %s #%d", p.Name, i+1), ClientCommand,
			"--peer", p.Name, "--addr", srv.addr,
			"--calls", strconv.FormatInt(s.MathProcCalls, 10),
			"--warmup", strconv.FormatInt(min(s.MathProcCalls/10, 1000), 10),
			"--limit", s.MathCap.String(), "--max-time", (s.MathCap + 2*time.Minute).String())
		if err != nil {
			return measured{}, err
		}
		kids = append(kids, k)
	}
	for _, k := range kids {
		line, err := k.readLine(time.Minute)
		if err != nil {
			return measured{}, err
		}
		if line != "ready" {
			return measured{}, k.failure("unexpected line " + strconv.Quote(line))
		}
	}
	runtime.GC()
	scpu0, _, err := srv.stats()
	if err != nil {
		return measured{}, err
	}
	start := time.Now()
	for _, k := range kids {
		if err := k.send("go"); err != nil {
			return measured{}, k.failure(err.Error())
		}
	}
	var m measured
	for _, k := range kids {
		line, err := k.readLine(s.MathCap + time.Minute)
		if err != nil {
			return measured{}, err
		}
		var calls, errs, wall, cpu int64
		var first string
		rest, ok := strings.CutPrefix(line, "done ")
		if !ok {
			return measured{}, k.failure("unexpected line " + strconv.Quote(line))
		}
		if _, err := fmt.Sscanf(rest, "%d %d %d %d", &calls, &errs, &wall, &cpu); err != nil {
			return measured{}, k.failure("bad done line " + strconv.Quote(line))
		}
		if i := strings.IndexByte(rest, '"'); i >= 0 {
			first, _ = strconv.Unquote(rest[i:])
		}
		m.calls += calls
		m.errors += errs
		m.clientCPU += time.Duration(cpu)
		if first != "" && m.firstErr == nil {
			m.firstErr = errors.New(first)
		}
		if calls < s.MathProcCalls {
			m.capped = true
		}
	}
	m.elapsed = time.Since(start)
	scpu1, _, err := srv.stats()
	if err != nil {
		return measured{}, err
	}
	m.serverCPU = scpu1 - scpu0
	return m, nil
}

// latency runs scenario 3: the echo handler sleeps, many callers share one
// connection; throughput is compared with Little's law.
func (r *runner) latency(ctx context.Context) error {
	var errs []error
	for _, p := range r.peers {
		if !p.Has(peers.OpEcho) || p.Name == peers.Raw {
			continue // the raw echo has no handler to sleep in
		}
		for _, sleep := range r.set.LatencySleeps {
			if ctx.Err() != nil {
				return errors.Join(append(errs, ctx.Err())...)
			}
			if err := r.latencyPeer(ctx, p, sleep); err != nil {
				errs = append(errs, fmt.Errorf("%s sleep %s: %w", p.Name, sleepString(sleep), err))
			}
		}
	}
	r.latencyLimits()
	return errors.Join(errs...)
}

func (r *runner) latencyPeer(ctx context.Context, p *peers.Peer, sleep time.Duration) error {
	r.prog.note(fmt.Sprintf("latency %s sleep=%s: starting server", p.Name, sleepString(sleep)))
	srv, err := r.server(p, sleep)
	if err != nil {
		return err
	}
	defer srv.stop()
	s := r.set
	c, err := p.Dial(ctx, srv.addr, peers.ClientOptions{Conns: 1})
	if err != nil {
		return err
	}
	defer c.Close()
	for _, callers := range s.LatencyCallers {
		label := fmt.Sprintf("latency %s sleep=%s callers=%d", p.Name, sleepString(sleep), callers)
		grace := sleep + s.LatencyGrace
		if s.LatencyWarmup || sleep < 100*time.Millisecond {
			warm := s.WarmupCap
			if sleep > 0 {
				warm = sleep / 2 // one call per caller
			}
			load{callers: callers, duration: warm, grace: sleep + 200*time.Millisecond, label: label + " warm-up"}.run(ctx, r.prog, echoOp(c))
		}
		m, err := r.measure(ctx, srv, load{
			callers: callers, duration: s.latencyWindow(sleep), grace: grace, latency: true, label: label,
		}, echoOp(c))
		if err != nil {
			return err
		}
		r.rep.Latency = append(r.rep.Latency, LatencyResult{
			Peer: p.Name, Sleep: sleep, Callers: callers,
			Calls: m.calls, Errors: m.errors, Abandoned: m.abandoned, Error: m.errString(),
			Seconds: m.elapsed.Seconds(), Throughput: m.throughput(), Latency: summarize(m.samples),
		})
	}
	return nil
}

// latencyLimits fills in the Little's-law limits and ratios.
func (r *runner) latencyLimits() {
	for i := range r.rep.Latency {
		lr := &r.rep.Latency[i]
		limit, src := 0.0, ""
		for _, e := range r.rep.Echo {
			if e.Peer == lr.Peer && e.Errors == 0 && e.Throughput > limit {
				limit, src = e.Throughput, "scenario 1 max"
			}
		}
		if limit == 0 {
			for _, o := range r.rep.Latency {
				if o.Peer == lr.Peer && o.Sleep == 0 && o.Errors == 0 && o.Throughput > limit {
					limit, src = o.Throughput, "0 ms max"
				}
			}
		}
		if lr.Sleep > 0 {
			if l := float64(lr.Callers) / lr.Sleep.Seconds(); limit == 0 || l < limit {
				limit, src = l, "callers / sleep"
			}
		}
		lr.Limit, lr.LimitSource = limit, src
		if limit > 0 {
			lr.Ratio = lr.Throughput / limit
		}
	}
}

// logs runs scenario 4: log batches shipped as fast as possible, as
// acknowledged calls and oneway.
func (r *runner) logs(ctx context.Context) error {
	var errs []error
	for _, p := range r.peers {
		var modes []string
		if p.Has(peers.OpLog) {
			modes = append(modes, LogAck)
		}
		if p.Has(peers.OpLogOneway) {
			modes = append(modes, LogOneway)
			if p.Name == peers.Fleet {
				modes = append(modes, LogOnewayZstd)
			}
		}
		if len(modes) == 0 {
			continue
		}
		if ctx.Err() != nil {
			return errors.Join(append(errs, ctx.Err())...)
		}
		if err := r.logsPeer(ctx, p, modes); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.Name, err))
		}
	}
	return errors.Join(errs...)
}

func (r *runner) logsPeer(ctx context.Context, p *peers.Peer, modes []string) error {
	r.prog.note(fmt.Sprintf("logs %s: starting server", p.Name))
	srv, err := r.server(p, 0)
	if err != nil {
		return err
	}
	defer srv.stop()
	for _, mode := range modes {
		if err := r.logsMode(ctx, p, srv, mode); err != nil {
			return fmt.Errorf("%s: %w", mode, err)
		}
	}
	return nil
}

func (r *runner) logsMode(ctx context.Context, p *peers.Peer, srv *serverProc, mode string) error {
	s := r.set
	c, err := p.Dial(ctx, srv.addr, peers.ClientOptions{Conns: 1, Compress: mode == LogOnewayZstd})
	if err != nil {
		return err
	}
	defer c.Close()
	op := func(ctx context.Context, _ int64) error { return c.Log(ctx) }
	how := "acknowledged call"
	if mode != LogAck {
		op = func(ctx context.Context, _ int64) error { return c.LogOneway(ctx) }
		how = p.OnewayDesc
		if mode == LogOnewayZstd {
			how += ", zstd"
		}
	}
	label := fmt.Sprintf("logs %s %s, %d senders", p.Name, mode, s.LogSenders)
	load{callers: s.LogSenders, duration: s.LogWarmup, grace: 30 * time.Second, label: label + " warm-up"}.run(ctx, r.prog, op)

	runtime.GC()
	scpu0, recv0, err := srv.stats()
	if err != nil {
		return err
	}
	if mode != LogAck {
		// Let the warm-up's batches arrive first.
		if recv0, err = waitReceived(srv, recv0, 2*time.Second); err != nil {
			return err
		}
	}
	ccpu0, start := cpuTime(), time.Now()
	res := load{callers: s.LogSenders, duration: s.LogDuration, grace: 30 * time.Second, label: label}.run(ctx, r.prog, op)
	sent := (res.calls - res.errors) * peers.LogBatchSize
	entries := sent
	var recv1 int64
	if mode != LogAck {
		// Oneway: count what the server received, waiting for the batches
		// still in flight.
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, recv1, err = srv.stats()
			if err != nil {
				return err
			}
			if recv1-recv0 >= sent || time.Now().After(deadline) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		entries = recv1 - recv0
	}
	elapsed, ccpu := time.Since(start), cpuTime()-ccpu0
	scpu1, _, err := srv.stats()
	if err != nil {
		return err
	}
	lr := LogResult{
		Peer: p.Name, Mode: mode, How: how, Senders: s.LogSenders,
		Batches: res.calls - res.errors, Entries: entries, Errors: res.errors, Error: res.errString(),
		Seconds:      elapsed.Seconds(),
		ClientCPUPct: 100 * ccpu.Seconds() / elapsed.Seconds(),
		ServerCPUPct: 100 * (scpu1 - scpu0).Seconds() / elapsed.Seconds(),
	}
	if mode != LogAck && entries < sent && lr.Error == "" {
		lr.Error = fmt.Sprintf("server received %d of %d entries sent", entries, sent)
	}
	lr.EntriesPerSec = float64(entries) / elapsed.Seconds()
	lr.MBPerSec = lr.EntriesPerSec * float64(peers.LogEntryBytes) / 1e6
	r.rep.Logs = append(r.rep.Logs, lr)
	return nil
}

// waitReceived waits until the server's received count stops changing and
// returns it.
func waitReceived(srv *serverProc, last int64, max time.Duration) (int64, error) {
	deadline := time.Now().Add(max)
	for time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		_, n, err := srv.stats()
		if err != nil {
			return 0, err
		}
		if n == last {
			return n, nil
		}
		last = n
	}
	return last, nil
}
