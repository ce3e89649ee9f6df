package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/internal/benchpb"
	"github.com/fleetrpc/fleet/internal/demo"
	fleetprom "github.com/fleetrpc/fleet/observability/prometheus"
	"github.com/fleetrpc/fleet/policy"
	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/selector"
	"github.com/fleetrpc/fleet/server"
	"github.com/prometheus/client_golang/prometheus"
)

// canaryShares are the shares of Hello's traffic the canary demo moves to
// v2, in percent, one step each.
var canaryShares = []int{0, 5, 50, 100}

// canaryStep is one step of the canary demo; its JSON form is what
// `fleet demo --canary --json` prints, one array of steps.
type canaryStep struct {
	Version string  `json:"policy_version"`
	Set     int     `json:"set_percent"`
	V2Share float64 `json:"v2_percent"`
	Calls   int64   `json:"calls"`
	Errors  int64   `json:"errors"`
	// Retries counts the attempts after the first: with --fault, the
	// injected aborts the callers' retries absorbed.
	Retries    int64  `json:"retries"`
	FirstError string `json:"first_error,omitempty"`
	// InForce is the version fleet_policy_version reported after the
	// policy was put (scraped from the demo's Prometheus registry): the
	// step's own, or the last good one when the step's was Refused.
	InForce string `json:"in_force"`
	// Refused is why the step's policy was refused, "" when applied.
	Refused string `json:"refused,omitempty"`
}

// canaryBad is the version of the invalid policy the canary demo puts
// after its last step (weights summing to 110), to show it refused and
// the last good one kept.
const canaryBad = "canary-bad"

// canaryServer is a demo server of Hello with a version.
type canaryServer struct {
	*demoServer
	version string
}

// runCanary runs `fleet demo --canary`: two v1 and two v2 servers of
// Hello in the registry, a client applying the policy held in the same
// registry, and
// the policy moving 0% → 5% → 50% → 100% of the calls to v2, each step
// checked by the share of calls the v2 servers served. With --fault, one
// more route aborts 10% of Hello.Say's attempts with Unavailable and the
// route's retry policy absorbs them. It fails when a call failed.
func runCanary(ctx context.Context, f demoFlags, stdout, stderr io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	sel, err := selector.New(f.selector, selector.Config{})
	if err != nil {
		return err
	}
	network, err := setupNetwork(f.network)
	if err != nil {
		return err
	}
	b, err := openRegistry(f.registry, "")
	if err != nil {
		return err
	}
	defer b.close()
	store, closeStore, err := openPolicyStore(b.url, 10*time.Second)
	if err != nil {
		return err
	}
	defer closeStore()

	var servers []*canaryServer
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, d := range servers {
			d.srv.Shutdown(sctx)
			d.reg.Close()
		}
	}()
	for _, v := range []string{"v1", "v1", "v2", "v2"} {
		d, err := startCanaryServer(ctx, b, v, network)
		if err != nil {
			return err
		}
		servers = append(servers, d)
	}
	// Start from no policy, let the watcher follow the registry, and
	// leave no policy behind.
	if err := store.Put(ctx, "Hello", nil); err != nil {
		return err
	}
	defer store.Put(context.Background(), "Hello", nil)
	refusals := make(canaryRefusals, 1)
	w, err := policy.NewWatcher(store, "Hello", policy.WatcherConfig{Logger: quietLogger(), Observer: refusals})
	if err != nil {
		return err
	}
	defer w.Close()
	metrics := prometheus.NewRegistry()
	metrics.MustRegister(fleetprom.NewPolicyCollector(nil, w))
	var obs retryCounter
	x, err := client.NewXClient("Hello", b.discovery, client.WithSelector(sel), client.WithIdempotent("Say"),
		client.WithFilters(selector.ByGroup("demo")), client.WithPolicy(policy.NewClient(w)), client.WithObserver(&obs))
	if err != nil {
		return err
	}
	defer x.Close()
	if err := waitServers(ctx, x, len(servers)); err != nil {
		return err
	}
	if !f.json {
		fault := ""
		if f.fault {
			fault = "; fault: 10% of Hello.Say's attempts aborted with unavailable, retried up to 8 attempts"
		}
		fmt.Fprintf(stderr, "registry: %s (holding Hello's policy); servers v1: %s, %s; v2: %s, %s%s\n",
			b.name, servers[0].addr, servers[1].addr, servers[2].addr, servers[3].addr, fault)
	}
	perStep := max(1, f.calls/(len(canaryShares)+1))
	args := benchpb.New()
	var steps []canaryStep
	failed := int64(0)
	for i := range len(canaryShares) + 1 {
		var version, refused string
		var pct int
		if i < len(canaryShares) {
			pct = canaryShares[i]
			version = fmt.Sprintf("canary-%d-%d", i+1, pct)
			if err := store.Put(ctx, "Hello", canaryPolicy(version, pct, f.fault)); err != nil {
				return err
			}
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := w.Wait(wctx, version)
			cancel()
			if err != nil {
				return fmt.Errorf("policy %s not applied within 10s: %v (%+v)", version, err, w.Stats())
			}
		} else {
			// A bad policy: refused, and the last good one stays.
			pct, version = canaryShares[i-1], canaryBad
			doc := canaryDocument(version, 100, f.fault)
			doc.Routes[len(doc.Routes)-1].Destinations[0].Weight = 10
			b, err := doc.JSON()
			if err != nil {
				return err
			}
			if err := store.Put(ctx, "Hello", b); err != nil {
				return err
			}
			select {
			case err := <-refusals:
				refused = err.Error()
			case <-time.After(10 * time.Second):
				return fmt.Errorf("policy %s not refused within 10s (%+v)", version, w.Stats())
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		inForce, _, _, err := policyMetrics(metrics)
		if err != nil {
			return err
		}
		if want := canaryWantInForce(steps, version, refused); inForce != want {
			return fmt.Errorf("policy %s: fleet_policy_version reports %q in force, want %q", version, inForce, want)
		}
		before := make([]int64, len(servers))
		for k, d := range servers {
			before[k] = d.hello.Served.Load()
		}
		retries0 := obs.retries.Load()
		res := demo.Run(ctx, perStep, f.callers, func(ctx context.Context) error {
			var reply benchpb.BenchmarkMessage
			if err := x.Call(ctx, "Say", args, &reply); err != nil {
				return err
			}
			return demo.CheckReply(args, &reply)
		}, nil)
		var v1n, v2n int64
		for k, d := range servers {
			n := d.hello.Served.Load() - before[k]
			if d.version == "v2" {
				v2n += n
			} else {
				v1n += n
			}
		}
		st := canaryStep{Version: version, Set: pct, Calls: res.Calls, Errors: res.Errors,
			Retries: obs.retries.Load() - retries0, FirstError: res.FirstError, InForce: inForce, Refused: refused}
		if v1n+v2n > 0 {
			st.V2Share = 100 * float64(v2n) / float64(v1n+v2n)
		}
		steps = append(steps, st)
		failed += res.Errors
		if !f.json {
			line := fmt.Sprintf("policy %-14s v2 set %3d%%  observed %6.2f%% of %d calls, %d failed", version, pct, st.V2Share, st.Calls, st.Errors)
			if refused != "" {
				line = fmt.Sprintf("policy %-14s refused (%s);\n       %-14s in force: observed %6.2f%% of %d calls, %d failed", version, refused, inForce, st.V2Share, st.Calls, st.Errors)
			}
			if f.fault {
				line += fmt.Sprintf(", %d injected aborts retried", st.Retries)
			}
			fmt.Fprintln(stdout, line)
		}
	}
	if !f.json {
		version, applied, refused, err := policyMetrics(metrics)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "metrics: fleet_policy_version{service=\"Hello\",version=%q} 1, fleet_policy_applied_total %g, fleet_policy_refused_total %g\n",
			version, applied, refused)
	}
	if f.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(steps); err != nil {
			return err
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d calls failed", failed)
	}
	return nil
}

// canaryPolicy is the demo's policy document: pct percent of Hello's
// calls to the v2 subset, the rest to v1; with fault, Hello.Say's
// attempts are aborted at 10% and retried.
func canaryPolicy(version string, pct int, fault bool) []byte {
	b, err := canaryDocument(version, pct, fault).JSON()
	if err != nil {
		panic(err) // a Document of plain fields always encodes
	}
	return b
}

// canaryDocument is canaryPolicy's document.
func canaryDocument(version string, pct int, fault bool) *policy.Document {
	doc := &policy.Document{
		Version: version, Service: "Hello",
		Subsets: []policy.Subset{{Name: "v1", Version: "v1"}, {Name: "v2", Version: "v2"}},
	}
	dests := []policy.Destination{{Subset: "v1", Weight: 100 - pct}, {Subset: "v2", Weight: pct}}
	if fault {
		doc.Routes = append(doc.Routes, policy.Route{
			Name:         "say-fault",
			Match:        policy.Match{Method: "Say"},
			Destinations: dests,
			Retry: &policy.Retry{Attempts: 8, RetryOn: []string{"unavailable"},
				Backoff: policy.Backoff{Base: policy.Duration(time.Millisecond), Max: policy.Duration(10 * time.Millisecond)},
				Budget:  &policy.Budget{Percent: 50}},
			Fault: &policy.Fault{Abort: &policy.FaultAbort{Code: "unavailable", Percent: 10}},
		})
	}
	doc.Routes = append(doc.Routes, policy.Route{Name: "split", Destinations: dests})
	return doc
}

// canaryWantInForce is the version that should be in force after a step put
// version: its own, or when it was refused, the last applied step's.
func canaryWantInForce(steps []canaryStep, version, refused string) string {
	if refused == "" {
		return version
	}
	if len(steps) == 0 {
		return ""
	}
	return steps[len(steps)-1].InForce
}

// policyMetrics returns Hello's policy metrics as a scrape of reg reads
// them: the version fleet_policy_version reports in force, and the
// documents applied and refused.
func policyMetrics(reg prometheus.Gatherer) (version string, applied, refused float64, err error) {
	mfs, err := reg.Gather()
	if err != nil {
		return "", 0, 0, err
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["service"] != "Hello" {
				continue
			}
			switch mf.GetName() {
			case "fleet_policy_version":
				if m.GetGauge().GetValue() == 1 {
					version = labels["version"]
				}
			case "fleet_policy_applied_total":
				applied = m.GetCounter().GetValue()
			case "fleet_policy_refused_total":
				refused = m.GetCounter().GetValue()
			}
		}
	}
	return version, applied, refused, nil
}

// canaryRefusals is a policy.Observer passing on the refusals.
type canaryRefusals chan error

func (canaryRefusals) Applied(string, string) {}
func (r canaryRefusals) Refused(_ string, err error) {
	select {
	case r <- err:
	default:
	}
}

func startCanaryServer(ctx context.Context, b *registryBackend, version, network string) (*canaryServer, error) {
	d := &demoServer{srv: server.New(server.WithLogger(quietLogger())), hello: &demo.Hello{}, done: make(chan struct{})}
	if err := d.srv.Register(d.hello); err != nil {
		return nil, err
	}
	lis, err := d.srv.Listen(network, "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	d.addr = lis.Addr().String()
	go func() { defer close(d.done); d.srv.Serve(lis) }()
	if d.reg, err = b.newRegistrar(); err != nil {
		d.srv.Close()
		return nil, err
	}
	in := registry.Instance{Service: "Hello", Addr: d.addr, Network: network, Group: "demo", Version: version, Tags: []string{version}}
	if err := d.srv.Publish(ctx, d.reg, in, server.PublishConfig{LoadInterval: time.Second, DrainDelay: 300 * time.Millisecond}); err != nil {
		d.srv.Close()
		return nil, err
	}
	return &canaryServer{demoServer: d, version: version}, nil
}

// retryCounter is an XObserver counting retries.
type retryCounter struct{ retries atomic.Int64 }

func (*retryCounter) OnServers(string, []string) {}
func (*retryCounter) OnPick(string, string)      {}
func (r *retryCounter) OnRetry(string, string)   { r.retries.Add(1) }
func (*retryCounter) OnBackup(string, string)    {}
