package policy_test

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/policy"
	"github.com/fleetrpc/fleet/policy/policytest"
	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/registry/static"
	"github.com/fleetrpc/fleet/selector"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.DiscardHandler)

// fixture is two v1 nodes and two v2 nodes of Echo, a policy Store, a
// Watcher on it and an XClient applying it.
type fixture struct {
	v1, v2 []*policytest.Node
	store  policy.Store
	w      *policy.Watcher
	x      *client.XClient
}

func newFixture(t *testing.T, store policy.Store) *fixture {
	t.Helper()
	f := &fixture{store: store}
	var list []registry.Instance
	for i := range 4 {
		v := "v1"
		if i >= 2 {
			v = "v2"
		}
		n, err := policytest.Start(fmt.Sprintf("%s-%d", v, i%2), v, v)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.Close)
		if v == "v1" {
			f.v1 = append(f.v1, n)
		} else {
			f.v2 = append(f.v2, n)
		}
		list = append(list, n.Instance())
	}
	disc, err := static.NewDiscovery(static.Config{Instances: list})
	if err != nil {
		t.Fatal(err)
	}
	f.w, err = policy.NewWatcher(store, "Echo", policy.WatcherConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.w.Close() })
	f.x, err = client.NewXClient("Echo", disc, client.WithSelector(selector.NewRandom()),
		client.WithPolicy(policy.NewClient(f.w)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.x.Close() })
	return f
}

// set writes doc to the store and waits until the watcher runs version.
func (f *fixture) set(t *testing.T, version, doc string) {
	t.Helper()
	if err := f.store.Put(context.Background(), "Echo", []byte(doc)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := f.w.Wait(ctx, version); err != nil {
		t.Fatalf("version %s not applied: %v (stats %+v)", version, err, f.w.Stats())
	}
}

// run makes n calls of method with ctx from 8 goroutines and counts the
// answering nodes and the failures.
func (f *fixture) run(ctx context.Context, n int, method string, req policytest.Req) (*policytest.Shares, []error) {
	var sh policytest.Shares
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	per := n / 8
	for range 8 {
		wg.Go(func() {
			for range per {
				var rep policytest.Rep
				if err := f.x.Call(ctx, method, &req, &rep); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					continue
				}
				sh.Add(rep.From)
			}
		})
	}
	wg.Wait()
	return &sh, errs
}

func canaryDoc(version string, v2 int) string {
	return fmt.Sprintf(`{"version":%q,"service":"Echo",
		"subsets":[{"name":"v1","version":"v1"},{"name":"v2","tags":["v2"]}],
		"routes":[{"destinations":[{"subset":"v1","weight":%d},{"subset":"v2","weight":%d}]}]}`, version, 100-v2, v2)
}

// testCanary moves the split 0 → 5 → 50 → 100 and checks each step's
// share of v2 over 10,000 calls within ±2 points, with no failed call.
func testCanary(t *testing.T, f *fixture) {
	for i, pct := range []int{0, 5, 50, 100} {
		v := fmt.Sprintf("canary-%d", i)
		f.set(t, v, canaryDoc(v, pct))
		sh, errs := f.run(context.Background(), 10000, "Do", policytest.Req{})
		if len(errs) > 0 {
			t.Fatalf("%d%%: %d failed calls, first %v", pct, len(errs), errs[0])
		}
		got := sh.Percent(f.v2[0].Name, f.v2[1].Name)
		t.Logf("set %d%% to v2, observed %.2f%%", pct, got)
		if math.Abs(got-float64(pct)) > 2 {
			t.Fatalf("set %d%% to v2, observed %.2f%%", pct, got)
		}
	}
}

func TestCanarySplit(t *testing.T) { testCanary(t, newFixture(t, &policy.Memory{})) }

// testHeaderRoute: calls carrying x-env: canary go to v2, exactly those.
func testHeaderRoute(t *testing.T, f *fixture) {
	f.set(t, "hdr", `{"version":"hdr","service":"Echo",
		"subsets":[{"name":"v1","version":"v1"},{"name":"v2","version":"v2"}],
		"routes":[
		  {"match":{"headers":[{"name":"x-env","exact":"canary"}]},"destinations":[{"subset":"v2","weight":100}]},
		  {"destinations":[{"subset":"v1","weight":100}]}]}`)
	canary := fleet.AppendOutgoingMetadata(context.Background(), "x-env", "canary")
	other := fleet.AppendOutgoingMetadata(context.Background(), "x-env", "canary-not")
	for _, c := range []struct {
		ctx  context.Context
		want []*policytest.Node
	}{{canary, f.v2}, {other, f.v1}, {context.Background(), f.v1}} {
		sh, errs := f.run(c.ctx, 800, "Do", policytest.Req{})
		if len(errs) > 0 {
			t.Fatal(errs[0])
		}
		if got := sh.Percent(c.want[0].Name, c.want[1].Name); got != 100 {
			t.Fatalf("%.2f%% of the calls reached %s", got, c.want[0].Version)
		}
	}
}

func TestHeaderRoute(t *testing.T) { testHeaderRoute(t, newFixture(t, &policy.Memory{})) }

// testLiveTimeoutAndRetry changes a route's timeout and retry policy and
// sees each change on the next call.
func testLiveTimeoutAndRetry(t *testing.T, f *fixture) {
	ctx := context.Background()
	slow := policytest.Req{Sleep: 300 * time.Millisecond}
	f.set(t, "t1", `{"version":"t1","service":"Echo","routes":[{"match":{"method":"Do"},"timeout":"50ms"}]}`)
	var rep policytest.Rep
	if err := f.x.Call(ctx, "Do", &slow, &rep); fleet.CodeOf(err) != fleet.DeadlineExceeded {
		t.Fatalf("under a 50ms timeout a 300ms call returned %v", err)
	}
	if err := f.x.Call(ctx, "Other", &slow, &rep); err != nil {
		t.Fatalf("the route is for Do only, Other failed: %v", err)
	}
	f.set(t, "t2", `{"version":"t2","service":"Echo","routes":[{"match":{"method":"Do"},"timeout":"10s"}]}`)
	if err := f.x.Call(ctx, "Do", &slow, &rep); err != nil {
		t.Fatalf("under a 10s timeout: %v", err)
	}

	// Retry: v1-0 fails every call with Aborted, which the XClient does
	// not retry by default.
	f.v1[0].FailAll.Store(uint32(fleet.Aborted))
	defer f.v1[0].FailAll.Store(0)
	f.set(t, "r1", `{"version":"r1","service":"Echo","routes":[{"retry":{"attempts":1}}]}`)
	before := f.v1[0].Calls.Load()
	_, errs := f.run(ctx, 400, "Do", policytest.Req{})
	if n := f.v1[0].Calls.Load() - before; int64(len(errs)) != n || n == 0 {
		t.Fatalf("without retries, %d calls failed, the failing node took %d", len(errs), n)
	}
	for _, err := range errs {
		if fleet.CodeOf(err) != fleet.Aborted {
			t.Fatalf("unexpected failure %v", err)
		}
	}
	before = f.v1[0].Calls.Load()
	f.set(t, "r2", `{"version":"r2","service":"Echo",
		"routes":[{"retry":{"attempts":4,"retryOn":["aborted"],"budget":{"percent":100}}}]}`)
	_, errs = f.run(ctx, 400, "Do", policytest.Req{})
	if len(errs) > 0 {
		t.Fatalf("retried on aborted over four nodes, %d calls failed: %v", len(errs), errs[0])
	}
	if f.v1[0].Calls.Load() == before {
		t.Fatal("the failing node took no call: the retries were not exercised")
	}
}

func TestLiveTimeoutAndRetry(t *testing.T) {
	testLiveTimeoutAndRetry(t, newFixture(t, &policy.Memory{}))
}

// testFault: 10% aborts only for the calls carrying x-test, ±2 points.
func testFault(t *testing.T, f *fixture) {
	f.set(t, "f1", `{"version":"f1","service":"Echo","routes":[
	  {"match":{"method":"Do","headers":[{"name":"x-test","present":true}]},
	   "retry":{"attempts":1},
	   "fault":{"abort":{"code":"unavailable","percent":10}}}]}`)
	matched := fleet.AppendOutgoingMetadata(context.Background(), "x-test", "1")
	_, errs := f.run(matched, 10000, "Do", policytest.Req{})
	for _, err := range errs {
		if fleet.CodeOf(err) != fleet.Unavailable || !strings.Contains(err.Error(), "fault injected") {
			t.Fatalf("unexpected failure %v", err)
		}
	}
	share := 100 * float64(len(errs)) / 10000
	t.Logf("aborted %.2f%% of the matched calls", share)
	if math.Abs(share-10) > 2 {
		t.Fatalf("aborted %.2f%% of the matched calls, want 10±2", share)
	}
	for _, c := range []struct {
		ctx    context.Context
		method string
	}{{context.Background(), "Do"}, {matched, "Other"}} {
		if _, errs := f.run(c.ctx, 2000, c.method, policytest.Req{}); len(errs) > 0 {
			t.Fatalf("unmatched calls (%s) failed: %v", c.method, errs[0])
		}
	}
}

func TestFault(t *testing.T) { testFault(t, newFixture(t, &policy.Memory{})) }

// testBadPolicyKept: a bad document is refused, counted, and the last
// good policy stays in force.
func testBadPolicyKept(t *testing.T, f *fixture) {
	f.set(t, "good", canaryDoc("good", 100))
	for i, bad := range []string{
		`{"version":"bad","service":"Echo","subsets":[{"name":"v1","version":"v1"}],"routes":[{"destinations":[{"subset":"v1","weight":90}]}]}`,
		`{"version":"bad","service":"Other"}`,
		`not a policy: [`,
	} {
		if err := f.store.Put(context.Background(), "Echo", []byte(bad)); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		for f.w.Stats().Refused < int64(i+1) && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
		st := f.w.Stats()
		if st.Refused != int64(i+1) || st.Version != "good" || st.LastError == "" {
			t.Fatalf("after bad document %d: %+v", i, st)
		}
		sh, errs := f.run(context.Background(), 400, "Do", policytest.Req{})
		if len(errs) > 0 || sh.Percent(f.v2[0].Name, f.v2[1].Name) != 100 {
			t.Fatalf("the last good policy is not in force: %v", errs)
		}
	}
}

func TestBadPolicyKept(t *testing.T) { testBadPolicyKept(t, newFixture(t, &policy.Memory{})) }

func TestHedge(t *testing.T) {
	f := newFixture(t, &policy.Memory{})
	// v1-0 answers after a minute only; hedging after 20ms to another
	// server answers every call well within the 10s timeout.
	f.v1[0].Delay.Store(int64(time.Minute))
	f.set(t, "h", `{"version":"h","service":"Echo","routes":[{"timeout":"10s","hedge":{"attempts":2,"delay":"20ms"}}]}`)
	var rep policytest.Rep
	for range 40 {
		if err := f.x.Call(context.Background(), "Do", &policytest.Req{}, &rep); err != nil {
			t.Fatal(err)
		}
		if rep.From == f.v1[0].Name {
			t.Fatal("the slow node answered")
		}
	}
	if f.v1[0].Calls.Load() == 0 {
		t.Fatal("the slow node took no call: hedging was not exercised")
	}
}

func TestFileSource(t *testing.T) {
	path := filepath.Join(t.TempDir(), "echo.yaml")
	if err := os.WriteFile(path, []byte("version: f1\nservice: Echo\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, policy.File{Path: path, Interval: 10 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := f.w.Wait(ctx, "f1"); err != nil {
		t.Fatal(err)
	}
	testHeaderRoute(t, f)
	testBadPolicyKept(t, f)
	// A file that disappears is an outage, not a deletion.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	sh, errs := f.run(context.Background(), 400, "Do", policytest.Req{})
	if len(errs) > 0 || sh.Percent(f.v2[0].Name, f.v2[1].Name) != 100 || f.w.Stats().Version != "good" {
		t.Fatalf("after the file went away: %v %+v", errs, f.w.Stats())
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
