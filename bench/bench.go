package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fleetrpc/fleet/bench/peers"
)

// Scenario names, in the order `all` runs them.
const (
	ScenarioEcho    = "echo"
	ScenarioMath    = "math"
	ScenarioLatency = "latency"
	ScenarioLogs    = "logs"
	ScenarioCodecs  = "codecs"
	ScenarioStreams = "streams"
)

// Scenarios lists every scenario in run order.
var Scenarios = []string{ScenarioEcho, ScenarioMath, ScenarioLatency, ScenarioLogs, ScenarioCodecs, ScenarioStreams}

// OptionalScenarios run only when named (not by all or by default), after
// those of Scenarios.
var OptionalScenarios = []string{ScenarioOverload}

// Mode selects the sizes of a run.
type Mode string

// The run sizes: Full is the published run, Quick runs everything in under
// a minute, Tiny is for tests (a second or so per peer and scenario).
const (
	Full  Mode = "full"
	Quick Mode = "quick"
	Tiny  Mode = "tiny"
)

// Options configures Run. The zero value runs every scenario and peer at
// full size, with no output file.
type Options struct {
	// Scenarios to run; empty means all, in the order of Scenarios.
	Scenarios []string
	// Peers to measure; empty means every registered peer except the
	// variants (peers.Default).
	Peers []string
	// Mode sets the sizes; empty means Full.
	Mode Mode
	// LogSenders is the number of goroutines shipping log batches over
	// the one connection of scenario 4; zero means 4.
	LogSenders int
	// Repeat runs the echo scenario this many rounds and reports the
	// median round and the spread of each figure; 0 or 1 means one round.
	Repeat int
	// Out is the markdown report to write, with its charts in img/ next
	// to it and the JSON results beside it (".json"); empty writes none.
	Out string
	// JSON writes the results as JSON to Stdout instead of the tables.
	JSON bool
	// Command is the command line that reproduces the run, for the report.
	Command string
	// Stdout receives the tables (or JSON); nil means os.Stdout.
	Stdout io.Writer
	// Stderr receives the progress line; nil means os.Stderr.
	Stderr io.Writer
	// Launch starts child processes; nil means SelfLauncher.
	Launch Launcher
}

// Render rewrites the tables, the markdown report at out and its charts
// from the JSON results of an earlier run (in), without measuring anything.
func Render(in, out string, stdout io.Writer) (*Report, error) {
	b, err := os.ReadFile(in)
	if err != nil {
		return nil, err
	}
	rep := new(Report)
	if err := json.Unmarshal(b, rep); err != nil {
		return nil, fmt.Errorf("bench: %s: %w", in, err)
	}
	rep.Charts = nil
	r := &runner{set: rep.Settings, rep: rep}
	// Results written before the per-call CPU figures and the per-round
	// ratios existed get them from what they have.
	for i := range rep.Echo {
		rep.Echo[i].cpuPerCall()
	}
	for i := range rep.EchoRounds {
		rep.EchoRounds[i].cpuPerCall()
	}
	if len(rep.EchoRounds) > 0 {
		rep.EchoSpread = r.echoSpreads()
	}
	if stdout != nil {
		for _, s := range Scenarios {
			if t := r.table(s); t != "" {
				fmt.Fprintln(stdout, t)
			}
		}
		if t := r.targetsTable(); t != "" {
			fmt.Fprintf(stdout, "### Targets\n\n%s\n", t)
		}
	}
	if out == "" {
		return rep, nil
	}
	return rep, r.write(out)
}

// Report is the result of a run, as written with --json.
type Report struct {
	Machine Machine      `json:"machine"`
	Command string       `json:"command"`
	Mode    Mode         `json:"mode"`
	Started time.Time    `json:"started"`
	Seconds float64      `json:"seconds"`
	Peers   []PeerInfo   `json:"peers"`
	Echo    []EchoResult `json:"echo,omitempty"`
	// EchoRounds holds every round of a --repeat run (Echo then holds the
	// median rounds) and EchoSpread the spread of each figure.
	EchoRounds []EchoResult     `json:"echo_rounds,omitempty"`
	EchoSpread []EchoSpread     `json:"echo_spread,omitempty"`
	Math       []MathResult     `json:"math,omitempty"`
	Latency    []LatencyResult  `json:"latency,omitempty"`
	Logs       []LogResult      `json:"logs,omitempty"`
	Codecs     []CodecResult    `json:"codecs,omitempty"`
	Streams    []StreamResult   `json:"streams,omitempty"`
	Overload   []OverloadResult `json:"overload,omitempty"`
	Settings   Settings         `json:"settings"`
	Charts     []string         `json:"charts,omitempty"`
}

// PeerInfo describes a measured peer.
type PeerInfo struct {
	Name  string `json:"name"`
	Title string `json:"title"`
	Desc  string `json:"desc"`
}

// Run runs the benchmark and reports the results.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	if o.Launch == nil {
		o.Launch = SelfLauncher
	}
	if o.Mode == "" {
		o.Mode = Full
	}
	if o.LogSenders <= 0 {
		o.LogSenders = 4
	}
	scen, err := selectScenarios(o.Scenarios)
	if err != nil {
		return nil, err
	}
	ps, err := selectPeers(o.Peers)
	if err != nil {
		return nil, err
	}
	r := &runner{
		o:     o,
		peers: ps,
		set:   settingsFor(o.Mode, o.LogSenders),
		prog:  newProgress(o.Stderr),
		rep: &Report{
			Machine: machineInfo(),
			Command: o.Command,
			Mode:    o.Mode,
			Started: time.Now().UTC(),
		},
	}
	r.rep.Settings = r.set
	for _, p := range ps {
		r.rep.Peers = append(r.rep.Peers, PeerInfo{Name: p.Name, Title: p.Title, Desc: p.Desc})
	}
	var errs []error
	for _, s := range scen {
		var err error
		switch s {
		case ScenarioEcho:
			err = r.echo(ctx)
		case ScenarioMath:
			err = r.math(ctx)
		case ScenarioLatency:
			err = r.latency(ctx)
		case ScenarioLogs:
			err = r.logs(ctx)
		case ScenarioCodecs:
			err = r.codecs(ctx)
		case ScenarioStreams:
			err = r.streams(ctx)
		case ScenarioOverload:
			err = r.overload(ctx)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s, err))
			if ctx.Err() != nil {
				break
			}
		}
		if !o.JSON {
			if t := r.table(s); t != "" {
				r.prog.clear()
				fmt.Fprintln(o.Stdout, t)
			}
		}
	}
	r.rep.Seconds = time.Since(r.rep.Started).Seconds()
	r.prog.done()
	if !o.JSON {
		if t := r.targetsTable(); t != "" {
			fmt.Fprintf(o.Stdout, "### Targets\n\n%s\n", t)
		}
	}
	if o.Out != "" {
		if err := r.write(o.Out); err != nil {
			errs = append(errs, err)
		}
	}
	if o.JSON {
		enc := json.NewEncoder(o.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r.rep); err != nil {
			errs = append(errs, err)
		}
	}
	return r.rep, errors.Join(errs...)
}

func selectScenarios(names []string) ([]string, error) {
	if len(names) == 0 || slices.Contains(names, "all") {
		out := slices.Clone(Scenarios)
		for _, n := range names {
			if slices.Contains(OptionalScenarios, n) && !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
		return out, nil
	}
	var out []string
	known := append(slices.Clone(Scenarios), OptionalScenarios...)
	for _, s := range known {
		if slices.Contains(names, s) {
			out = append(out, s)
		}
	}
	for _, n := range names {
		if !slices.Contains(known, n) {
			return nil, fmt.Errorf("bench: unknown scenario %q (have %s, all)", n, strings.Join(known, ", "))
		}
	}
	return out, nil
}

func selectPeers(names []string) ([]*peers.Peer, error) {
	if len(names) == 0 {
		return peers.Default(), nil
	}
	var out []*peers.Peer
	for _, p := range peers.All() {
		if slices.Contains(names, p.Name) {
			out = append(out, p)
		}
	}
	for _, n := range names {
		if peers.Get(n) == nil {
			return nil, fmt.Errorf("bench: unknown peer %q (have %s)", n, strings.Join(peers.Names(), ", "))
		}
	}
	return out, nil
}

// KeepMarker is the line in a report after which a full run keeps what the
// file already holds: the hand-written, undated method of the scenarios
// that run only when named (overload, soak, streams, transports), whose
// results are printed, not written to the report.
const KeepMarker = "<!-- fleet bench keeps everything below this line when it rewrites the file -->"

// KeepTail returns report md followed by the part of old from KeepMarker
// on, or md alone when old has no marker.
func KeepTail(old, md string) string {
	i := strings.Index(old, KeepMarker)
	if i < 0 {
		return md
	}
	return strings.TrimRight(md, "\n") + "\n\n" + old[i:]
}

// runner carries one run's state.
type runner struct {
	o     Options
	peers []*peers.Peer
	set   Settings
	prog  *progress
	rep   *Report
	round int // current echo round of a --repeat run, 0 in a single run
}

// server starts a bench-server child for peer p.
func (r *runner) server(p *peers.Peer, sleep time.Duration) (*serverProc, error) {
	return startServer(r.o.Launch, p.Name, sleep, r.set.ChildMaxTime)
}

func (r *runner) write(out string) error {
	dir := filepath.Dir(out)
	img := filepath.Join(dir, "img")
	if err := os.MkdirAll(img, 0o755); err != nil {
		return err
	}
	charts, err := r.charts(img)
	for _, c := range charts {
		rel, _ := filepath.Rel(dir, c)
		r.rep.Charts = append(r.rep.Charts, filepath.ToSlash(rel))
	}
	if err != nil {
		err = fmt.Errorf("bench: charts: %w", err)
	}
	md := r.markdown()
	if old, rerr := os.ReadFile(out); rerr == nil {
		md = KeepTail(string(old), md)
	}
	if werr := os.WriteFile(out, []byte(md), 0o644); werr != nil {
		return errors.Join(err, werr)
	}
	js, jerr := json.MarshalIndent(r.rep, "", "  ")
	if jerr == nil {
		jerr = os.WriteFile(strings.TrimSuffix(out, filepath.Ext(out))+".json", append(js, '\n'), 0o644)
	}
	return errors.Join(err, jerr)
}
