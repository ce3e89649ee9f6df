package bench_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fleetrpc/fleet/bench"
)

// TestOverloadTiny runs the overload scenario at its tiny size and checks
// the rows it reports: every call is accounted for, the closed-loop rows
// (no deadline, no limiter) fail none, and the table is printed. (The figures themselves depend on
// the machine and are not asserted.)
func TestOverloadTiny(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	rep, err := bench.Run(ctx, bench.Options{
		Scenarios: []string{bench.ScenarioOverload},
		Mode:      bench.Tiny,
		Stdout:    &stdout,
		Stderr:    &stderr,
		Launch:    testLauncher,
	})
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, stderr.String())
	}
	want := []string{"uncongested", "peak", "2x, no limit", "2x, adaptive limit"}
	if len(rep.Overload) != len(want) {
		t.Fatalf("%d rows, want %d: %+v", len(rep.Overload), len(want), rep.Overload)
	}
	for i, o := range rep.Overload {
		if o.Test != want[i] {
			t.Errorf("row %d is %q, want %q", i, o.Test, want[i])
		}
		if o.OK+o.Shed+o.Failed != o.Calls || o.Calls == 0 {
			t.Errorf("%s: ok %d + shed %d + failed %d != calls %d", o.Test, o.OK, o.Shed, o.Failed, o.Calls)
		}
		if i < 2 && (o.Failed != 0 || o.Shed != 0 || o.OK == 0) {
			t.Errorf("%s: closed loop without a limit: %+v", o.Test, o)
		}
		if i != 3 && o.Shed != 0 {
			t.Errorf("%s: %d calls shed without the adaptive limit", o.Test, o.Shed)
		}
	}
	if !strings.Contains(stdout.String(), "2x, adaptive limit") {
		t.Errorf("table not printed:\n%s", stdout.String())
	}
}

// TestAllExcludesOverload: all runs the default scenarios only.
func TestAllExcludesOverload(t *testing.T) {
	for _, s := range bench.Scenarios {
		if s == bench.ScenarioOverload {
			t.Fatal("overload is in bench.Scenarios")
		}
	}
}
