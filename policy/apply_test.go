package policy_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/policy"
	"github.com/fleetrpc/fleet/policy/policytest"
	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/server"
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

func TestBreaker(t *testing.T) { policytest.Breaker(t, policytest.NewFixture(t, &policy.Memory{})) }

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

// TestApplyLimits: ApplyLimits sets a document's limits on a real server,
// removes those a new document drops, leaves a method no document names
// with its code limits, and keeps the limits when a document is refused.
func TestApplyLimits(t *testing.T) {
	var mem policy.Memory
	w, err := policy.NewWatcher(&mem, "Echo", policy.WatcherConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	srv := server.New(server.WithMethodRateLimit("Echo", "Code", 7, 1))
	stop := policy.ApplyLimits(w, policy.ServerLimits(srv), quiet)
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
	limits := func(m string) server.MethodLimits { l, _ := srv.MethodLimitsOf("Echo", m); return l }
	put("l1", `{"version":"l1","service":"Echo","limits":[{"method":"Do","rate":50,"burst":5},{"method":"Other","maxConcurrent":2}]}`)
	if limits("Do") != (server.MethodLimits{Rate: 50, Burst: 5}) || limits("Other") != (server.MethodLimits{MaxConcurrent: 2}) {
		t.Fatalf("after l1: Do %+v, Other %+v", limits("Do"), limits("Other"))
	}
	put("l2", `{"version":"l2","service":"Echo","limits":[{"method":"Do","rate":10}]}`)
	if limits("Do") != (server.MethodLimits{Rate: 10, Burst: 1}) || limits("Other") != (server.MethodLimits{}) {
		t.Fatalf("after l2: Do %+v, Other %+v", limits("Do"), limits("Other"))
	}
	if err := w.Apply([]byte(`{"version":"bad","service":"Echo","limits":[{"method":"Do","rate":-1},{"method":"Other","maxConcurrent":9}]}`)); err == nil {
		t.Fatal("a negative rate was accepted")
	}
	if limits("Do") != (server.MethodLimits{Rate: 10, Burst: 1}) || limits("Other") != (server.MethodLimits{}) {
		t.Fatalf("a refused document changed the limits: Do %+v, Other %+v", limits("Do"), limits("Other"))
	}
	if limits("Code") != (server.MethodLimits{Rate: 7, Burst: 1}) {
		t.Fatalf("a method no document names lost its code limits: %+v", limits("Code"))
	}
}

// TestApplyLimitsAtomic: each document's limits reach the server in one
// step. While documents alternate between two sets of limits for three
// methods (and an invalid document is refused in between), a reader of
// the server's admission table (AdmissionStats, one load) under -race
// never sees methods with limits from different documents.
func TestApplyLimitsAtomic(t *testing.T) {
	w, err := policy.NewWatcher(&policy.Memory{}, "Echo", policy.WatcherConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	firstDelivery(t, w)
	srv := server.New()
	stop := policy.ApplyLimits(w, policy.ServerLimits(srv), quiet)
	defer stop()
	doc := func(n int) []byte {
		return fmt.Appendf(nil, `{"version":"v%d","service":"Echo","limits":[{"method":"A","maxConcurrent":%d},{"method":"B","maxConcurrent":%d},{"method":"C","maxConcurrent":%d}]}`, n, n, n, n)
	}
	if err := w.Apply(doc(1)); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			if err := w.Apply(doc(1 + i%2)); err != nil {
				t.Error(err)
				return
			}
			if w.Apply([]byte(`{"version":"bad","service":"Echo","limits":[{"method":"A","maxConcurrent":-1},{"method":"B","maxConcurrent":5}]}`)) == nil {
				t.Error("an invalid document was applied")
				return
			}
		}
	}()
	defer func() { close(done); wg.Wait() }()
	for range 2000 {
		got := map[string]float64{}
		for _, st := range srv.AdmissionStats() {
			if st.Service == "Echo" && st.Stage == server.StageMethodConcurrency {
				got[st.Method] = st.Limit
			}
		}
		if len(got) != 3 || got["A"] != got["B"] || got["B"] != got["C"] {
			t.Fatalf("a call would see a torn set of limits: %v", got)
		}
	}
}

// firstDelivery waits until w has applied its source's first delivery
// (an empty Memory's: no policy), so that it does not undo a document the
// test applies itself.
func firstDelivery(t *testing.T, w *policy.Watcher) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for w.Stats().Applied == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the watcher applied nothing")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestApplyLimitsSetterError: when the setter fails, nothing counts as
// applied: the next document is applied against what the server still
// has, so a method the failed document added and the next one dropped is
// not left behind, and one the failed document dropped is still removed.
func TestApplyLimitsSetterError(t *testing.T) {
	w, err := policy.NewWatcher(&policy.Memory{}, "Echo", policy.WatcherConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	firstDelivery(t, w)
	srv := server.New()
	real := policy.ServerLimits(srv)
	var fail atomic.Bool
	stop := policy.ApplyLimits(w, policy.LimitSetterFunc(func(svc string, l map[string]policy.Limits) error {
		if fail.Load() {
			return errors.New("refused")
		}
		return real.SetServiceLimits(svc, l)
	}), quiet)
	defer stop()
	apply := func(d string) {
		t.Helper()
		if err := w.Apply([]byte(d)); err != nil {
			t.Fatal(err)
		}
	}
	apply(`{"version":"1","service":"Echo","limits":[{"method":"A","maxConcurrent":1}]}`)
	fail.Store(true)
	apply(`{"version":"2","service":"Echo","limits":[{"method":"B","maxConcurrent":2}]}`)
	if _, ok := srv.MethodLimitsOf("Echo", "B"); ok {
		t.Fatal("a failed setter changed the server")
	}
	fail.Store(false)
	apply(`{"version":"3","service":"Echo","limits":[{"method":"C","maxConcurrent":3}]}`)
	_, a := srv.MethodLimitsOf("Echo", "A")
	_, b := srv.MethodLimitsOf("Echo", "B")
	l, _ := srv.MethodLimitsOf("Echo", "C")
	if a || b || l.MaxConcurrent != 3 {
		t.Fatalf("after 3: A set %v, B set %v, C %+v; want only C", a, b, l)
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
