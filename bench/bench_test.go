package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetrpc/fleet/bench"
	"github.com/fleetrpc/fleet/bench/peers"
)

const childEnv = "FLEET_BENCH_TEST_CHILD"

// TestMain makes the test binary serve as the benchmark's child processes:
// the harness re-executes it with childEnv set.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		if err := bench.ChildMain(os.Args[1:], os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func testLauncher(args ...string) (*exec.Cmd, error) {
	cmd := exec.Command(os.Args[0], args...)
	// A race-enabled binary sleeps a second at exit unless told not to.
	cmd.Env = append(os.Environ(), childEnv+"=1", "GORACE=atexit_sleep_ms=0")
	return cmd, nil
}

// TestRunTiny runs a tiny version of every scenario against every peer,
// through the real harness (server and client child processes), and checks
// that every peer answered every operation it offers correctly, and that
// the report, its charts and its JSON are written.
func TestRunTiny(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	dir := t.TempDir()
	out := filepath.Join(dir, "docs", "benchmarks.md")
	var stdout, stderr bytes.Buffer
	var progress io.Writer = &stderr
	if testing.Verbose() {
		progress = io.MultiWriter(&stderr, os.Stderr)
	}
	rep, err := bench.Run(ctx, bench.Options{
		Mode:    bench.Tiny,
		Out:     out,
		Command: "go run ./cmd/fleet bench --test",
		Stdout:  &stdout,
		Stderr:  progress,
		Launch:  testLauncher,
	})
	if err != nil {
		t.Fatalf("Run: %v\nprogress:\n%s", err, stderr.String())
	}

	for _, p := range peers.Default() {
		if p.Has(peers.OpEcho) {
			found := false
			for _, e := range rep.Echo {
				if e.Peer == p.Name {
					found = true
					if e.Errors != 0 || e.Calls == 0 || e.Throughput <= 0 || e.Latency.P99 <= 0 {
						t.Errorf("echo %s: %+v", p.Name, e)
					}
				}
			}
			if !found {
				t.Errorf("echo: no result for %s", p.Name)
			}
		}
		if p.Has(peers.OpAdd) {
			tests := map[string]bool{}
			for _, m := range rep.Math {
				if m.Peer == p.Name {
					tests[m.Test] = true
					if m.Errors != 0 || m.Calls == 0 || m.Throughput <= 0 {
						t.Errorf("math %s %s: %+v", p.Name, m.Test, m)
					}
				}
			}
			if !tests["long"] || !tests["short"] || !tests["procs"] {
				t.Errorf("math %s: tests %v, want long, short and procs", p.Name, tests)
			}
		}
		if p.Has(peers.OpEcho) && p.Name != peers.Raw {
			n := 0
			for _, l := range rep.Latency {
				if l.Peer == p.Name {
					n++
					if l.Errors != 0 || l.Calls == 0 || l.Limit <= 0 || l.Ratio <= 0 {
						t.Errorf("latency %s: %+v", p.Name, l)
					}
				}
			}
			if n != 2 {
				t.Errorf("latency %s: %d results, want 2", p.Name, n)
			}
		}
		for _, mode := range []string{bench.LogAck, bench.LogOneway} {
			op := peers.OpLog
			if mode == bench.LogOneway {
				op = peers.OpLogOneway
			}
			if !p.Has(op) {
				continue
			}
			found := false
			for _, l := range rep.Logs {
				if l.Peer == p.Name && l.Mode == mode {
					found = true
					if l.Errors != 0 || l.Error != "" || l.Entries == 0 || l.Entries%peers.LogBatchSize != 0 {
						t.Errorf("logs %s %s: %+v", p.Name, mode, l)
					}
				}
			}
			if !found {
				t.Errorf("logs: no %s result for %s", mode, p.Name)
			}
		}
	}
	if len(rep.Codecs) == 0 {
		t.Error("codecs: no results")
	}
	for _, c := range rep.Codecs {
		if c.Error != "" || c.MarshalNs <= 0 || c.UnmarshalNs <= 0 || c.Size == 0 {
			t.Errorf("codec %s %s: %+v", c.Owner, c.Codec, c)
		}
	}

	for _, h := range []string{"Scenario 1", "Scenario 2", "Scenario 3", "Scenario 4", "Scenario 5"} {
		if !strings.Contains(stdout.String(), h) {
			t.Errorf("stdout lacks the %s table", h)
		}
	}
	md, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"go run ./cmd/fleet bench --test", "| CPU |", "## 1. Echo", "## 5. Codecs", "Fleet/peer"} {
		if !bytes.Contains(md, []byte(want)) {
			t.Errorf("report lacks %q", want)
		}
	}
	if len(rep.Charts) == 0 {
		t.Error("no charts drawn")
	}
	for _, c := range rep.Charts {
		path := filepath.Join(filepath.Dir(out), c)
		b, err := os.ReadFile(path)
		if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
			t.Errorf("chart %s: not a PNG (%v)", c, err)
		}
		if !bytes.Contains(md, []byte("]("+c+")")) {
			t.Errorf("report does not show %s", c)
		}
	}
	js, err := os.ReadFile(filepath.Join(filepath.Dir(out), "benchmarks.json"))
	if err != nil {
		t.Fatal(err)
	}
	var back bench.Report
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatalf("benchmarks.json: %v", err)
	}
	if len(back.Echo) != len(rep.Echo) || back.Machine.Cores == 0 {
		t.Errorf("benchmarks.json does not hold the results")
	}
}

// TestRunJSON checks --json output for one scenario and peer.
func TestRunJSON(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stdout bytes.Buffer
	_, err := bench.Run(ctx, bench.Options{
		Scenarios: []string{bench.ScenarioMath},
		Peers:     []string{peers.NetRPC},
		Mode:      bench.Tiny,
		JSON:      true,
		Stdout:    &stdout,
		Stderr:    new(bytes.Buffer),
		Launch:    testLauncher,
	})
	if err != nil {
		t.Fatal(err)
	}
	var rep bench.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, stdout.String())
	}
	if len(rep.Math) != 3 || len(rep.Echo) != 0 {
		t.Errorf("got %d math and %d echo results, want 3 and 0", len(rep.Math), len(rep.Echo))
	}
}

func TestBadArguments(t *testing.T) {
	for _, o := range []bench.Options{
		{Scenarios: []string{"nope"}},
		{Peers: []string{"nope"}},
	} {
		o.Stdout, o.Stderr, o.Launch = new(bytes.Buffer), new(bytes.Buffer), testLauncher
		if _, err := bench.Run(context.Background(), o); err == nil {
			t.Errorf("Run(%v, %v) succeeded", o.Scenarios, o.Peers)
		}
	}
	if err := bench.ChildMain([]string{"bench-nope"}, nil, nil); err == nil {
		t.Error("ChildMain accepted an unknown command")
	}
}
