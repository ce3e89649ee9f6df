package policytest

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/policy"
	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/registry/static"
	"github.com/fleetrpc/fleet/selector"
)

// Quiet is a logger that discards everything, for watchers in tests.
var Quiet = slog.New(slog.DiscardHandler)

// Fixture is two v1 nodes and two v2 nodes of Echo, a policy Store, a
// Watcher on it and an XClient applying it.
type Fixture struct {
	V1, V2 []*Node
	Store  policy.Store
	W      *policy.Watcher
	X      *client.XClient
}

func NewFixture(t *testing.T, store policy.Store) *Fixture {
	t.Helper()
	f := &Fixture{Store: store}
	var list []registry.Instance
	for i := range 4 {
		v := "v1"
		if i >= 2 {
			v = "v2"
		}
		n, err := Start(fmt.Sprintf("%s-%d", v, i%2), v, v)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.Close)
		if v == "v1" {
			f.V1 = append(f.V1, n)
		} else {
			f.V2 = append(f.V2, n)
		}
		list = append(list, n.Instance())
	}
	disc, err := static.NewDiscovery(static.Config{Instances: list})
	if err != nil {
		t.Fatal(err)
	}
	f.W, err = policy.NewWatcher(store, "Echo", policy.WatcherConfig{Logger: Quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.W.Close() })
	f.X, err = client.NewXClient("Echo", disc, client.WithSelector(selector.NewRandom()),
		client.WithPolicy(policy.NewClient(f.W)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.X.Close() })
	return f
}

// Set writes doc to the store (retrying for up to 20s while the store
// refuses) and waits until the watcher runs version.
func (f *Fixture) Set(t *testing.T, version, doc string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// A store just back from an outage may refuse writes for a moment.
	for {
		err := f.Store.Put(ctx, "Echo", []byte(doc))
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := f.W.Wait(ctx, version); err != nil {
		t.Fatalf("version %s not applied: %v (stats %+v)", version, err, f.W.Stats())
	}
}

// Run makes n calls of method with ctx from 8 goroutines and counts the
// answering nodes and the failures.
func (f *Fixture) Run(ctx context.Context, n int, method string, req Req) (*Shares, []error) {
	var sh Shares
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	per := n / 8
	for range 8 {
		wg.Go(func() {
			for range per {
				var rep Rep
				if err := f.X.Call(ctx, method, &req, &rep); err != nil {
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

func CanaryDoc(version string, v2 int) string {
	return fmt.Sprintf(`{"version":%q,"service":"Echo",
		"subsets":[{"name":"v1","version":"v1"},{"name":"v2","tags":["v2"]}],
		"routes":[{"destinations":[{"subset":"v1","weight":%d},{"subset":"v2","weight":%d}]}]}`, version, 100-v2, v2)
}

// Canary moves the split 0 → 5 → 50 → 100 and checks each step's
// share of v2 over 10,000 calls within ±2 points, with no failed call.
func Canary(t *testing.T, f *Fixture) {
	for i, pct := range []int{0, 5, 50, 100} {
		v := fmt.Sprintf("canary-%d", i)
		f.Set(t, v, CanaryDoc(v, pct))
		sh, errs := f.Run(context.Background(), 10000, "Do", Req{})
		if len(errs) > 0 {
			t.Fatalf("%d%%: %d failed calls, first %v", pct, len(errs), errs[0])
		}
		got := sh.Percent(f.V2[0].Name, f.V2[1].Name)
		t.Logf("set %d%% to v2, observed %.2f%%", pct, got)
		if math.Abs(got-float64(pct)) > 2 {
			t.Fatalf("set %d%% to v2, observed %.2f%%", pct, got)
		}
	}
}

// HeaderRoute: calls carrying x-env: canary go to v2, exactly those.
func HeaderRoute(t *testing.T, f *Fixture) {
	f.Set(t, "hdr", `{"version":"hdr","service":"Echo",
		"subsets":[{"name":"v1","version":"v1"},{"name":"v2","version":"v2"}],
		"routes":[
		  {"match":{"headers":[{"name":"x-env","exact":"canary"}]},"destinations":[{"subset":"v2","weight":100}]},
		  {"destinations":[{"subset":"v1","weight":100}]}]}`)
	canary := fleet.AppendOutgoingMetadata(context.Background(), "x-env", "canary")
	other := fleet.AppendOutgoingMetadata(context.Background(), "x-env", "canary-not")
	for _, c := range []struct {
		ctx  context.Context
		want []*Node
	}{{canary, f.V2}, {other, f.V1}, {context.Background(), f.V1}} {
		sh, errs := f.Run(c.ctx, 800, "Do", Req{})
		if len(errs) > 0 {
			t.Fatal(errs[0])
		}
		if got := sh.Percent(c.want[0].Name, c.want[1].Name); got != 100 {
			t.Fatalf("%.2f%% of the calls reached %s", got, c.want[0].Version)
		}
	}
}

// LiveTimeoutAndRetry changes a route's timeout and retry policy and
// sees each change on the next call.
func LiveTimeoutAndRetry(t *testing.T, f *Fixture) {
	ctx := context.Background()
	slow := Req{Sleep: 300 * time.Millisecond}
	f.Set(t, "t1", `{"version":"t1","service":"Echo","routes":[{"match":{"method":"Do"},"timeout":"50ms"}]}`)
	var rep Rep
	if err := f.X.Call(ctx, "Do", &slow, &rep); fleet.CodeOf(err) != fleet.DeadlineExceeded {
		t.Fatalf("under a 50ms timeout a 300ms call returned %v", err)
	}
	if err := f.X.Call(ctx, "Other", &slow, &rep); err != nil {
		t.Fatalf("the route is for Do only, Other failed: %v", err)
	}
	f.Set(t, "t2", `{"version":"t2","service":"Echo","routes":[{"match":{"method":"Do"},"timeout":"10s"}]}`)
	if err := f.X.Call(ctx, "Do", &slow, &rep); err != nil {
		t.Fatalf("under a 10s timeout: %v", err)
	}

	// Retry: v1-0 fails every call with Aborted, which the XClient does
	// not retry by default.
	f.V1[0].FailAll.Store(uint32(fleet.Aborted))
	defer f.V1[0].FailAll.Store(0)
	f.Set(t, "r1", `{"version":"r1","service":"Echo","routes":[{"retry":{"attempts":1}}]}`)
	before := f.V1[0].Calls.Load()
	_, errs := f.Run(ctx, 400, "Do", Req{})
	if n := f.V1[0].Calls.Load() - before; int64(len(errs)) != n || n == 0 {
		t.Fatalf("without retries, %d calls failed, the failing node took %d", len(errs), n)
	}
	for _, err := range errs {
		if fleet.CodeOf(err) != fleet.Aborted {
			t.Fatalf("unexpected failure %v", err)
		}
	}
	before = f.V1[0].Calls.Load()
	f.Set(t, "r2", `{"version":"r2","service":"Echo",
		"routes":[{"retry":{"attempts":4,"retryOn":["aborted"],"budget":{"percent":100}}}]}`)
	_, errs = f.Run(ctx, 400, "Do", Req{})
	if len(errs) > 0 {
		t.Fatalf("retried on aborted over four nodes, %d calls failed: %v", len(errs), errs[0])
	}
	if f.V1[0].Calls.Load() == before {
		t.Fatal("the failing node took no call: the retries were not exercised")
	}
}

// Fault: 10% aborts only for the calls carrying x-test, ±2 points.
func Fault(t *testing.T, f *Fixture) {
	f.Set(t, "f1", `{"version":"f1","service":"Echo","routes":[
	  {"match":{"method":"Do","headers":[{"name":"x-test","present":true}]},
	   "retry":{"attempts":1},
	   "fault":{"abort":{"code":"unavailable","percent":10}}}]}`)
	matched := fleet.AppendOutgoingMetadata(context.Background(), "x-test", "1")
	_, errs := f.Run(matched, 10000, "Do", Req{})
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
		if _, errs := f.Run(c.ctx, 2000, c.method, Req{}); len(errs) > 0 {
			t.Fatalf("unmatched calls (%s) failed: %v", c.method, errs[0])
		}
	}
	// The same aborts on a subset of two servers, absorbed by retries:
	// an injected abort does not count its server as tried.
	f.Set(t, "f2", `{"version":"f2","service":"Echo","subsets":[{"name":"v2","version":"v2"}],"routes":[
	  {"match":{"method":"Do"},"destinations":[{"subset":"v2","weight":100}],
	   "retry":{"attempts":8,"retryOn":["unavailable"],"budget":{"percent":50}},
	   "fault":{"abort":{"code":"unavailable","percent":10}}}]}`)
	if _, errs := f.Run(matched, 4000, "Do", Req{}); len(errs) > 0 {
		t.Fatalf("retries did not absorb the injected aborts: %d failed, first %v", len(errs), errs[0])
	}
}

// BadPolicyKept: a bad document is refused, counted, and the last
// good policy stays in force.
func BadPolicyKept(t *testing.T, f *Fixture) {
	f.Set(t, "good", CanaryDoc("good", 100))
	for i, bad := range []string{
		`{"version":"bad","service":"Echo","subsets":[{"name":"v1","version":"v1"}],"routes":[{"destinations":[{"subset":"v1","weight":90}]}]}`,
		`{"version":"bad","service":"Other"}`,
		`not a policy: [`,
	} {
		if err := f.Store.Put(context.Background(), "Echo", []byte(bad)); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		for f.W.Stats().Refused < int64(i+1) && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
		st := f.W.Stats()
		if st.Refused != int64(i+1) || st.Version != "good" || st.LastError == "" {
			t.Fatalf("after bad document %d: %+v", i, st)
		}
		sh, errs := f.Run(context.Background(), 400, "Do", Req{})
		if len(errs) > 0 || sh.Percent(f.V2[0].Name, f.V2[1].Name) != 100 {
			t.Fatalf("the last good policy is not in force: %v", errs)
		}
	}
}

// Outage: with the policy source down (stop), calls keep the last good
// policy; once it is back (start), a new document is applied.
func Outage(t *testing.T, f *Fixture, stop, start func()) {
	t.Helper()
	f.Set(t, "before-outage", CanaryDoc("before-outage", 100))
	stop()
	sh, errs := f.Run(context.Background(), 800, "Do", Req{})
	if len(errs) > 0 || sh.Percent(f.V2[0].Name, f.V2[1].Name) != 100 {
		t.Fatalf("during the outage: %d failed (%v), %.2f%% to v2", len(errs), errs, sh.Percent(f.V2[0].Name, f.V2[1].Name))
	}
	if st := f.W.Stats(); st.Version != "before-outage" {
		t.Fatalf("during the outage the watcher runs %+v", st)
	}
	start()
	f.Set(t, "after-outage", CanaryDoc("after-outage", 0))
	sh, errs = f.Run(context.Background(), 800, "Do", Req{})
	if len(errs) > 0 || sh.Percent(f.V1[0].Name, f.V1[1].Name) != 100 {
		t.Fatalf("after the outage: %v", errs)
	}
}

// Breaker: a route's circuit-breaker thresholds apply to its calls. v1-0
// fails every call with Internal (a server failure, not retried by
// default); calls of Do are sent one at a time to the v1 subset.
//   - Under b1 (failures 3), v1-0's breaker for the route opens after
//     exactly 3 failures, and the next calls all go to v1-1.
//   - b2 raises the threshold to 6: the next calls go through a new,
//     closed breaker, which opens after exactly 6 more failures.
//   - b3 changes another route, not the breaker: its state is kept, and
//     no call fails.
//   - Other, which no breaker route matches, goes through v1-0's own
//     breaker (the client's default, 5 failures), which the route's
//     calls did not feed: exactly 5 failures.
func Breaker(t *testing.T, f *Fixture) {
	ctx := context.Background()
	f.V1[0].FailAll.Store(uint32(fleet.Internal))
	defer f.V1[0].FailAll.Store(0)
	doc := func(version string, failures int, timeout string) string {
		return fmt.Sprintf(`{"version":%q,"service":"Echo","subsets":[{"name":"v1","version":"v1"},{"name":"v2","version":"v2"}],
		  "routes":[{"match":{"method":"Do"},"destinations":[{"subset":"v1","weight":100}],"breaker":{"failures":%d,"openFor":"1m"}},
		    {"match":{"method":"Never"},"timeout":%q}]}`, version, failures, timeout)
	}
	run := func(step, method string, n, wantFailed int) {
		t.Helper()
		failed := 0
		for range n {
			var rep Rep
			err := f.X.Call(ctx, method, &Req{}, &rep)
			switch {
			case err == nil:
			case fleet.CodeOf(err) == fleet.Internal:
				failed++
			default:
				t.Fatalf("%s: unexpected failure %v", step, err)
			}
		}
		if failed != wantFailed {
			t.Fatalf("%s: %d of %d calls failed, want %d", step, failed, n, wantFailed)
		}
	}
	f.Set(t, "b1", doc("b1", 3, "1s"))
	run("b1: failures 3", "Do", 60, 3)
	f.Set(t, "b2", doc("b2", 6, "1s"))
	run("b2: failures 6", "Do", 100, 6)
	f.Set(t, "b3", doc("b3", 6, "2s"))
	run("b3: the same breaker", "Do", 60, 0)
	run("Other: the client's own breaker", "Other", 160, 5)
}
