package policy_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/policy"
	"github.com/fleetrpc/fleet/policy/policytest"
	"github.com/fleetrpc/fleet/registry"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = policytest.Quiet

func TestCanarySplit(t *testing.T) { policytest.Canary(t, policytest.NewFixture(t, &policy.Memory{})) }

func TestHeaderRoute(t *testing.T) {
	policytest.HeaderRoute(t, policytest.NewFixture(t, &policy.Memory{}))
}

func TestLiveTimeoutAndRetry(t *testing.T) {
	policytest.LiveTimeoutAndRetry(t, policytest.NewFixture(t, &policy.Memory{}))
}

func TestFault(t *testing.T) { policytest.Fault(t, policytest.NewFixture(t, &policy.Memory{})) }

func TestBadPolicyKept(t *testing.T) {
	policytest.BadPolicyKept(t, policytest.NewFixture(t, &policy.Memory{}))
}

func TestHedge(t *testing.T) {
	f := policytest.NewFixture(t, &policy.Memory{})
	// v1-0 answers after a minute only; hedging after 20ms to another
	// server answers every call well within the 10s timeout.
	f.V1[0].Delay.Store(int64(time.Minute))
	f.Set(t, "h", `{"version":"h","service":"Echo","routes":[{"timeout":"10s","hedge":{"attempts":2,"delay":"20ms"}}]}`)
	var rep policytest.Rep
	for range 40 {
		if err := f.X.Call(context.Background(), "Do", &policytest.Req{}, &rep); err != nil {
			t.Fatal(err)
		}
		if rep.From == f.V1[0].Name {
			t.Fatal("the slow node answered")
		}
	}
	if f.V1[0].Calls.Load() == 0 {
		t.Fatal("the slow node took no call: hedging was not exercised")
	}
}

func TestFileSource(t *testing.T) {
	path := filepath.Join(t.TempDir(), "echo.yaml")
	if err := os.WriteFile(path, []byte("version: f1\nservice: Echo\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := policytest.NewFixture(t, policy.File{Path: path, Interval: 10 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := f.W.Wait(ctx, "f1"); err != nil {
		t.Fatal(err)
	}
	policytest.HeaderRoute(t, f)
	policytest.BadPolicyKept(t, f)
	// A file that disappears is an outage, not a deletion.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	sh, errs := f.Run(context.Background(), 400, "Do", policytest.Req{})
	if len(errs) > 0 || sh.Percent(f.V2[0].Name, f.V2[1].Name) != 100 || f.W.Stats().Version != "good" {
		t.Fatalf("after the file went away: %v %+v", errs, f.W.Stats())
	}
}

func TestApplyLimits(t *testing.T) {
	var mem policy.Memory
	w, err := policy.NewWatcher(&mem, "Echo", policy.WatcherConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var mu sync.Mutex
	set := map[string]policy.Limits{}
	stop := policy.ApplyLimits(w, policy.LimitSetterFunc(func(svc, m string, l policy.Limits) error {
		mu.Lock()
		defer mu.Unlock()
		set[svc+"."+m] = l
		return nil
	}), quiet)
	defer stop()
	put := func(version, doc string) {
		t.Helper()
		if err := mem.Put(context.Background(), "Echo", []byte(doc)); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := w.Wait(ctx, version); err != nil {
			t.Fatal(err)
		}
	}
	put("l1", `{"version":"l1","service":"Echo","limits":[{"method":"Do","rate":50,"burst":5},{"method":"Other","maxConcurrent":2}]}`)
	mu.Lock()
	if set["Echo.Do"] != (policy.Limits{Rate: 50, Burst: 5}) || set["Echo.Other"] != (policy.Limits{MaxConcurrent: 2}) {
		t.Fatalf("after l1: %+v", set)
	}
	mu.Unlock()
	put("l2", `{"version":"l2","service":"Echo","limits":[{"method":"Do","rate":10}]}`)
	mu.Lock()
	defer mu.Unlock()
	if set["Echo.Do"] != (policy.Limits{Rate: 10}) || set["Echo.Other"] != (policy.Limits{}) {
		t.Fatalf("after l2: %+v", set)
	}
}

// Deciding a call allocates nothing: the route match, the weighted draw
// and the subset's server filter are made when the policy or the server
// list changes.
func TestDecideAllocs(t *testing.T) {
	p, err := policy.Parse([]byte(goodYAML))
	if err != nil {
		t.Fatal(err)
	}
	c := policy.NewClient(policy.Static{P: p})
	c.Update([]registry.Instance{{Service: "Echo", Addr: "a:1", Version: "v1"}, {Service: "Echo", Addr: "b:1", Tags: []string{"v2"}}})
	canary := fleet.AppendOutgoingMetadata(context.Background(), "x-env", "canary")
	d := c.Decide(canary, "Do")
	if d.Allow == nil || !d.Allow("b:1") || d.Allow("a:1") {
		t.Fatal("the header route does not restrict the call to v2")
	}
	allocs := testing.AllocsPerRun(1000, func() {
		c.Decide(canary, "Do")
		c.Decide(context.Background(), "Other")
	})
	if allocs != 0 {
		t.Fatalf("Decide allocates %.1f times per call", allocs/2)
	}
}

// recorder is a policy.Observer.
type recorder struct {
	mu       sync.Mutex
	applied  []string
	refusals int
}

func (r *recorder) Applied(_, version string) {
	r.mu.Lock()
	r.applied = append(r.applied, version)
	r.mu.Unlock()
}
func (r *recorder) Refused(string, error) { r.mu.Lock(); r.refusals++; r.mu.Unlock() }

func TestWatcherObserver(t *testing.T) {
	var rec recorder
	var mem policy.Memory
	if err := mem.Put(context.Background(), "Echo", []byte(`{"version":"a","service":"Echo"}`)); err != nil {
		t.Fatal(err)
	}
	w, err := policy.NewWatcher(&mem, "Echo", policy.WatcherConfig{Logger: quiet, Observer: &rec})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := w.Wait(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := w.Apply([]byte(`{"version":"b"}`)); fleet.CodeOf(err) != fleet.InvalidArgument {
		t.Fatalf("a document without a service: %v", err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if !slices.Contains(rec.applied, "a") || rec.refusals != 1 {
		t.Fatalf("observer saw applied %v, %d refusals", rec.applied, rec.refusals)
	}
	if st := w.Stats(); st.Version != "a" || st.Refused != 1 {
		t.Fatalf("stats %+v", st)
	}
}
