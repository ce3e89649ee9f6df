package fleetprom_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	fleetprom "github.com/fleetrpc/fleet/observability/prometheus"
	"github.com/fleetrpc/fleet/policy"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// refusals tells a test of each document a watcher refused.
type refusals chan string

func (refusals) Applied(string, string)            {}
func (r refusals) Refused(service string, _ error) { r <- service }

func policyDoc(service, version string) []byte {
	return []byte(`{"version":"` + version + `","service":"` + service + `",
		"subsets":[{"name":"v1","version":"v1"},{"name":"v2","tags":["v2"]}],
		"routes":[{"name":"split","destinations":[{"subset":"v1","weight":90},{"subset":"v2","weight":10}]}]}`)
}

// TestPolicyCollector: watchers following a store are scraped from a
// registry: the version series follows a live change, a bad document is
// counted as refused while the last good version stays, a deletion leaves
// the version="" series at 0; the admin endpoint's /policy serves the
// same state as JSON, Host-checked like every route, and is absent when
// not configured.
func TestPolicyCollector(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	store := &policy.Memory{}
	refused := make(refusals, 4)
	quiet := slog.New(slog.DiscardHandler)
	// The first documents are in the store before the watchers start, so
	// each watcher's first delivery is one of them.
	if err := store.Put(ctx, "Hello", policyDoc("Hello", "1")); err != nil {
		t.Fatal(err)
	}
	if err := store.Put(ctx, "Arith", policyDoc("Arith", "a")); err != nil {
		t.Fatal(err)
	}
	hello, err := policy.NewWatcher(store, "Hello", policy.WatcherConfig{Logger: quiet, Observer: refused})
	if err != nil {
		t.Fatal(err)
	}
	defer hello.Close()
	arith, err := policy.NewWatcher(store, "Arith", policy.WatcherConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer arith.Close()

	pc := fleetprom.NewPolicyCollector(prometheus.Labels{"side": "client"}, hello)
	if err := pc.Add(arith); err != nil {
		t.Fatal(err)
	}
	if err := pc.Add(hello); err == nil {
		t.Fatal("a second watcher for Hello was added")
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(pc)

	expect := func(want string) {
		t.Helper()
		const head = `
# HELP fleet_policy_applied_total Traffic policy documents applied for a service, deletions included.
# TYPE fleet_policy_applied_total counter
# HELP fleet_policy_refused_total Traffic policy documents refused as invalid for a service; the last good policy stayed in force.
# TYPE fleet_policy_refused_total counter
# HELP fleet_policy_version Traffic policy version in force for a service: 1 on the series of the version in force, 0 with version="" when no policy is in force.
# TYPE fleet_policy_version gauge
`
		if err := testutil.GatherAndCompare(reg, strings.NewReader(head+want)); err != nil {
			t.Fatal(err)
		}
	}
	put := func(service string, doc []byte) {
		t.Helper()
		if err := store.Put(ctx, service, doc); err != nil {
			t.Fatal(err)
		}
	}
	wait := func(w *policy.Watcher, version string) {
		t.Helper()
		if err := w.Wait(ctx, version); err != nil {
			t.Fatalf("version %q: %v (%+v)", version, err, w.Stats())
		}
	}

	wait(hello, "1")
	wait(arith, "a")
	expect(`
fleet_policy_applied_total{service="Arith",side="client"} 1
fleet_policy_applied_total{service="Hello",side="client"} 1
fleet_policy_refused_total{service="Arith",side="client"} 0
fleet_policy_refused_total{service="Hello",side="client"} 0
fleet_policy_version{service="Arith",side="client",version="a"} 1
fleet_policy_version{service="Hello",side="client",version="1"} 1
`)

	put("Hello", policyDoc("Hello", "2"))
	wait(hello, "2")
	put("Hello", []byte(`{"version":"3","service":"Hello","routes":[{"destinations":[{"subset":"v9","weight":100}]}]}`))
	select {
	case <-refused:
	case <-ctx.Done():
		t.Fatalf("bad document not refused: %+v", hello.Stats())
	}
	put("Arith", nil)
	wait(arith, "")
	expect(`
fleet_policy_applied_total{service="Arith",side="client"} 2
fleet_policy_applied_total{service="Hello",side="client"} 2
fleet_policy_refused_total{service="Arith",side="client"} 0
fleet_policy_refused_total{service="Hello",side="client"} 1
fleet_policy_version{service="Arith",side="client",version=""} 0
fleet_policy_version{service="Hello",side="client",version="2"} 1
`)

	adm, err := fleetprom.ListenAdmin("127.0.0.1:0", fleetprom.AdminConfig{Gatherer: reg, Policies: pc.Watchers})
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	base := "http://" + adm.Addr().String()
	code, body := get(t, base+"/policy", "")
	if code != http.StatusOK {
		t.Fatalf("/policy: %d %s", code, body)
	}
	var got []struct {
		Service   string           `json:"service"`
		Version   string           `json:"version"`
		Applied   int64            `json:"applied"`
		Refused   int64            `json:"refused"`
		LastError string           `json:"lastError"`
		Policy    *policy.Document `json:"policy"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatalf("%v in %s", err, body)
	}
	if len(got) != 2 || got[0].Service != "Arith" || got[1].Service != "Hello" {
		t.Fatalf("/policy = %s, want Arith then Hello", body)
	}
	if a := got[0]; a.Version != "" || a.Policy != nil || a.Refused != 0 {
		t.Fatalf("/policy Arith = %+v, want no policy in force", a)
	}
	h := got[1]
	if h.Version != "2" || h.Applied != 2 || h.Refused != 1 || !strings.Contains(h.LastError, "v9") {
		t.Fatalf("/policy Hello = %+v, want version 2, 2 applied, 1 refused naming subset v9", h)
	}
	if h.Policy == nil || h.Policy.Version != "2" || len(h.Policy.Routes) != 1 || h.Policy.Routes[0].Destinations[1].Weight != 10 {
		t.Fatalf("/policy Hello's document = %+v, want version 2's", h.Policy)
	}

	// Host-checked like every admin route.
	req, _ := http.NewRequest("GET", base+"/policy", nil)
	req.Host = "evil.example"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("/policy with Host evil.example: %d, want 403", resp.StatusCode)
	}

	// Absent unless configured.
	plain, err := fleetprom.ListenAdmin("127.0.0.1:0", fleetprom.AdminConfig{Gatherer: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if code, _ := get(t, "http://"+plain.Addr().String()+"/policy", ""); code != http.StatusNotFound {
		t.Fatalf("/policy without Policies: %d, want 404", code)
	}
}
