package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/internal/benchpb"
	"github.com/fleetrpc/fleet/internal/demo"
	"github.com/fleetrpc/fleet/policy"
)

func TestDashboardNextVersion(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", "1"}, {"1", "2"}, {"41", "42"}, {"9", "10"}, {"199", "200"},
		{"canary-9", "canary-10"}, {"canary-4-100", "canary-4-101"}, {"canary", "canary-1"}, {"v1.0", "v1.1"},
	} {
		if got := nextVersion(c.in); got != c.want {
			t.Errorf("nextVersion(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// postPolicy posts body to /api/policy and returns the status and the
// decoded answer.
func postPolicy(t *testing.T, url, contentType, body string, hdr map[string]string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/api/policy", strings.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	out := map[string]any{}
	json.Unmarshal(b, &out)
	out["raw"] = string(b)
	return resp.StatusCode, out
}

// TestDashboardPolicyAPI: /api/services shows each service's policy as
// a watcher on the registry's store sees it; POST /api/policy edits a
// route's split or the whole document, refusing (and writing nothing)
// an invalid result, a stale base version, a cross-site or non-JSON
// request, and a document for another service; good edits bump the
// version and reach the watchers.
func TestDashboardPolicyAPI(t *testing.T) {
	f := startDemoFleet(t)
	store, closeStore, err := openPolicyStore(f.registryURL, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	doc := &policy.Document{Version: "7", Service: "Hello",
		Subsets: []policy.Subset{{Name: "one", Version: "1"}, {Name: "demo", Group: "demo"}},
		Routes: []policy.Route{
			{Name: "say", Match: policy.Match{Method: "Say"}, Timeout: policy.Duration(800 * time.Millisecond),
				Destinations: []policy.Destination{{Subset: "demo", Weight: 100}}},
			{Name: "split", Destinations: []policy.Destination{{Subset: "one", Weight: 100}, {Subset: "demo", Weight: 0}}},
		},
		Limits: []policy.MethodLimit{{Method: "Say", Rate: 500, Burst: 50, MaxConcurrent: 64}},
	}
	raw, err := doc.JSON()
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Put(ctx, "Hello", raw); err != nil {
		t.Fatal(err)
	}
	d := newTestDashboard(t, &dashboardFlags{registry: f.registryURL})
	hs := httptest.NewServer(d.handler())
	defer hs.Close()

	// waitPolicy polls /api/services until Hello's policy has version v.
	waitPolicy := func(v string) apiServices {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			var s apiServices
			getJSON(t, http.DefaultClient, hs.URL+"/api/services", &s)
			for _, svc := range s.Services {
				if svc.Name == "Hello" && svc.Policy != nil && svc.Policy.Version == v {
					return s
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("Hello's policy never reached version %q: %+v", v, s)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	s := waitPolicy("7")
	if s.PolicyStore == "" {
		t.Fatal("no policy store named")
	}
	for _, svc := range s.Services {
		p := svc.Policy
		switch svc.Name {
		case "Arith":
			if p == nil || p.Version != "" || p.Document != nil || p.Error != "" {
				t.Fatalf("Arith's policy: %+v", p)
			}
		case "Hello":
			if len(p.Document.Routes) != 2 || p.Document.Routes[1].Destinations[0].Weight != 100 ||
				p.Document.Routes[0].Timeout.D() != 800*time.Millisecond || len(p.Document.Limits) != 1 || p.Applied != 1 || p.Refused != 0 {
				t.Fatalf("Hello's policy: %+v", p)
			}
		}
	}

	// storedIs checks the store still holds version v.
	storedIs := func(what, v string) *policy.Document {
		t.Helper()
		b, err := store.Get(ctx, "Hello")
		if err != nil {
			t.Fatal(err)
		}
		got, err := policy.Decode(b)
		if err != nil || got.Version != v {
			t.Fatalf("%s: stored %s (%v), want version %s", what, b, err, v)
		}
		return got
	}
	split := func(base string, w1, w2 int) string {
		return fmt.Sprintf(`{"service":"Hello","base_version":%q,"route":1,"destinations":[{"subset":"one","weight":%d},{"subset":"demo","weight":%d}]}`, base, w1, w2)
	}

	// Refused, nothing written.
	for _, c := range []struct {
		name, ctype, body string
		hdr               map[string]string
		status            int
		code, msg         string
	}{
		{"weights sum to 110", "application/json", split("7", 60, 50), nil, 400, "invalid_argument", "routes[1](split).destinations: weights sum to 110, want 100"},
		{"negative weight", "application/json", split("7", 110, -10), nil, 400, "invalid_argument", "routes[1](split).destinations"},
		{"stale base version", "application/json", split("6", 50, 50), nil, 409, "aborted", `version "7" is stored, the page showed "6"`},
		{"other subsets", "application/json", `{"service":"Hello","base_version":"7","route":1,"destinations":[{"subset":"demo","weight":50},{"subset":"one","weight":50}]}`, nil, 400, "invalid_argument", `subset "demo" given, the route has "one"`},
		{"route out of range", "application/json", `{"service":"Hello","base_version":"7","route":5,"destinations":[]}`, nil, 400, "invalid_argument", "the policy has 2 routes"},
		{"bad regex document", "application/json", `{"service":"Hello","base_version":"7","document":"version: \"8\"\nservice: Hello\nroutes:\n- match: {headers: [{name: x-env, regex: \"(\"}]}\n"}`, nil, 400, "invalid_argument", "regex"},
		{"another service", "application/json", `{"service":"Hello","base_version":"7","document":"{\"version\":\"8\",\"service\":\"Arith\"}"}`, nil, 400, "invalid_argument", `policy for service "Arith", not "Hello"`},
		{"undecodable document", "application/json", `{"service":"Hello","base_version":"7","document":"{\"version\":"}`, nil, 400, "invalid_argument", "bad document"},
		{"not shown", "application/json", `{"service":"Nope","base_version":"7","document":"{}"}`, nil, 400, "", "not shown here"},
		{"both edits", "application/json", `{"service":"Hello","base_version":"7","route":1,"document":"{}"}`, nil, 400, "", "either route"},
		{"form post", "application/x-www-form-urlencoded", split("7", 50, 50), nil, 415, "", "application/json"},
		{"text/plain", "text/plain", split("7", 50, 50), nil, 415, "", "application/json"},
		{"cross-site", "application/json", split("7", 50, 50), map[string]string{"Sec-Fetch-Site": "cross-site"}, 403, "", ""},
		{"other origin", "application/json", split("7", 50, 50), map[string]string{"Origin": "http://evil.example"}, 403, "", ""},
	} {
		status, out := postPolicy(t, hs.URL, c.ctype, c.body, c.hdr)
		if status != c.status || (c.code != "" && out["code"] != c.code) || !strings.Contains(fmt.Sprint(out["message"]), c.msg) {
			t.Errorf("%s: %d %s", c.name, status, out["raw"])
		}
		storedIs(c.name, "7")
	}
	// The validation problems are listed one by one.
	_, out := postPolicy(t, hs.URL, "application/json", split("7", 60, 50), nil)
	if probs, _ := out["problems"].([]any); len(probs) != 1 || probs[0] != "routes[1](split).destinations: weights sum to 110, want 100" {
		t.Fatalf("problems: %s", out["raw"])
	}

	// A good split: written as version 8, the rest of the document kept,
	// and applied by the dashboard's watcher.
	status, out := postPolicy(t, hs.URL, "application/json", split("7", 50, 50), nil)
	if status != 200 || out["version"] != "8" || out["previous"] != "7" {
		t.Fatalf("split: %d %s", status, out["raw"])
	}
	got := storedIs("split", "8")
	want := *doc
	want.Version = "8"
	want.Routes = []policy.Route{doc.Routes[0], {Name: "split", Destinations: []policy.Destination{{Subset: "one", Weight: 50}, {Subset: "demo", Weight: 50}}}}
	gb, _ := got.JSON()
	wb, _ := want.JSON()
	if !bytes.Equal(gb, wb) {
		t.Fatalf("stored\n%s\nwant\n%s", gb, wb)
	}
	waitPolicy("8")

	// The whole document, as YAML, keeping the version shown: bumped.
	yamlDoc := "version: \"8\"\nservice: Hello\nsubsets: [{name: one, version: \"1\"}]\nroutes:\n- name: all\n  destinations: [{subset: one, weight: 100}]\n"
	body, _ := json.Marshal(map[string]string{"service": "Hello", "base_version": "8", "document": yamlDoc})
	if status, out := postPolicy(t, hs.URL, "application/json", string(body), nil); status != 200 || out["version"] != "9" {
		t.Fatalf("document: %d %s", status, out["raw"])
	}
	if got := storedIs("document", "9"); len(got.Routes) != 1 || got.Routes[0].Name != "all" {
		t.Fatalf("stored %+v", got)
	}
	s = waitPolicy("9")
	// A document that names a version of its own keeps it.
	body, _ = json.Marshal(map[string]string{"service": "Hello", "base_version": "9", "document": strings.Replace(yamlDoc, `"8"`, `"release-3"`, 1)})
	if status, out := postPolicy(t, hs.URL, "application/json", string(body), nil); status != 200 || out["version"] != "release-3" {
		t.Fatalf("document with its version: %d %s", status, out["raw"])
	}
	waitPolicy("release-3")

	// A bad document put around the dashboard: refused by the watcher,
	// which the page shows, and the last good one stays in force.
	if err := store.Put(ctx, "Hello", []byte(`{"version":"bad","service":"Hello","routes":[{"destinations":[{"subset":"nope","weight":100}]}]}`)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		getJSON(t, http.DefaultClient, hs.URL+"/api/services", &s)
		p := s.Services[1].Policy
		if p.Refusing != "" {
			if p.Version != "release-3" || p.Refused != 1 || !strings.Contains(p.Refusing, `unknown subset "nope"`) {
				t.Fatalf("refused: %+v", p)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the refusal never showed: %+v", p)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A split edit is refused over it (its base is not what is stored);
	// the whole document replaces it.
	if status, out := postPolicy(t, hs.URL, "application/json", split("release-3", 50, 50), nil); status != 409 {
		t.Fatalf("split over a refused document: %d %s", status, out["raw"])
	}
	body, _ = json.Marshal(map[string]string{"service": "Hello", "base_version": "bad", "document": yamlDoc})
	if status, out := postPolicy(t, hs.URL, "application/json", string(body), nil); status != 200 || out["version"] != "8" {
		t.Fatalf("document over a refused one: %d %s", status, out["raw"])
	}
	waitPolicy("8")
}

// TestDashboardPolicyBrowser drives the dashboard's policy editor in
// headless Chromium against real servers: one Hello server tagged v1 and
// one tagged v2 in an in-process etcd, and a client calling Hello.Say
// under a policy.Watcher on that etcd's policy store. The page shows the
// policy in force (version, subsets, routes, limits); an invalid split
// (60/50) is refused with its problem shown and nothing written; then
// the split moves 100/0 → 50/50 → 0/100 through the page, each after the
// confirmation, and the servers' call counts show the traffic following:
// none to v2, about half (35–65% of 2,000 calls), all of it. A whole
// document typed in the page with weights summing to 90 is refused too.
func TestDashboardPolicyBrowser(t *testing.T) {
	exe := chromiumPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	b, err := openRegistry("", "")
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	var servers []*canaryServer
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		for _, s := range servers {
			s.srv.Shutdown(sctx)
			s.reg.Close()
		}
	}()
	for _, v := range []string{"v1", "v2"} {
		s, err := startCanaryServer(ctx, b, v, "tcp")
		if err != nil {
			t.Fatal(err)
		}
		servers = append(servers, s)
	}
	store, closeStore, err := openPolicyStore(b.url, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore()
	doc := canaryDocument("web-1", 0, false)
	doc.Limits = []policy.MethodLimit{{Method: "Say", MaxConcurrent: 64}}
	raw, _ := doc.JSON()
	if err := store.Put(ctx, "Hello", raw); err != nil {
		t.Fatal(err)
	}
	w, err := policy.NewWatcher(store, "Hello", policy.WatcherConfig{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	x, err := client.NewXClient("Hello", b.discovery, client.WithIdempotent("Say"), client.WithPolicy(policy.NewClient(w)))
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if err := waitServers(ctx, x, 2); err != nil {
		t.Fatal(err)
	}
	// traffic waits until the client runs version, makes n calls and
	// returns the share the v2 server served, in percent.
	traffic := func(version string, n int) float64 {
		t.Helper()
		wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
		err := w.Wait(wctx, version)
		wcancel()
		if err != nil {
			t.Fatalf("the client never ran version %s: %v (%+v)", version, err, w.Stats())
		}
		v1, v2 := servers[0].hello.Served.Load(), servers[1].hello.Served.Load()
		args := benchpb.New()
		res := demo.Run(ctx, n, 4, func(ctx context.Context) error {
			var reply benchpb.BenchmarkMessage
			return x.Call(ctx, "Say", args, &reply)
		}, nil)
		if res.Errors > 0 {
			t.Fatalf("version %s: %d of %d calls failed: %s", version, res.Errors, res.Calls, res.FirstError)
		}
		v1, v2 = servers[0].hello.Served.Load()-v1, servers[1].hello.Served.Load()-v2
		if v1+v2 != int64(n) {
			t.Fatalf("version %s: servers answered %d+%d of %d calls", version, v1, v2, n)
		}
		t.Logf("version %s: v2 served %d of %d calls", version, v2, n)
		return 100 * float64(v2) / float64(n)
	}
	if got := traffic("web-1", 400); got != 0 {
		t.Fatalf("v2 served %.1f%% under 100/0", got)
	}

	d := newTestDashboard(t, &dashboardFlags{registry: b.url, services: []string{"Hello"}})
	hs := httptest.NewServer(d.handler())
	defer hs.Close()
	page, closePage := openBrowser(t, ctx, exe, hs.URL+"/")
	defer closePage()
	equals := func(want string) func(string) bool { return func(s string) bool { return s == want } }
	contains := func(want string) func(string) bool { return func(s string) bool { return strings.Contains(s, want) } }
	const box = `document.querySelector('#policies [data-policy-service="Hello"]')`
	const splitRow = box + `.querySelector('tr.route[data-name="split"]')`
	const weights = `Array.from(` + splitRow + `.querySelectorAll('input.weight-input')).map(i => i.dataset.subset + "=" + i.value).join(",")`
	const dialogOpen = `String(document.getElementById('confirm').open)`
	setSplit := func(w1, w2 string) {
		t.Helper()
		page.do("set "+w1+"/"+w2, `(() => { const ins = `+splitRow+`.querySelectorAll('input.weight-input'); ins[0].value = "`+w1+`"; ins[1].value = "`+w2+`"; `+splitRow+`.querySelector('button.split-apply').click(); })()`)
		page.eval("confirmation for "+w1+"/"+w2, dialogOpen, equals("true"))
	}

	// The policy in force, as the store holds it (the box is there from
	// the first poll on; it is replaced, never removed, when it changes).
	page.eval("policy shown", `String(`+box+` !== null)`, equals("true"))
	page.eval("version", box+`.querySelector('.policy-version').textContent`, equals("version web-1"))
	page.eval("subsets", box+`.querySelector('.subsets').textContent`, equals("subsets: v1 (version v1), v2 (version v2)"))
	page.eval("split", weights, equals("v1=100,v2=0"))
	page.eval("match", splitRow+`.querySelector('td.match').textContent`, equals("any method"))
	page.eval("limits", box+`.querySelector('tr.limit').textContent`, equals("Saynone64"))
	page.eval("watcher status", box+`.querySelector('.policy-status').textContent`, equals("watcher: 1 applied, 0 refused"))

	// Cancel leaves it; an invalid split is refused, shown, not written.
	setSplit("50", "50")
	page.eval("confirmation text", `document.getElementById('confirm-text').textContent`, contains("v1 100% \u2192 50%, v2 0% \u2192 50%"))
	page.do("cancel", `document.getElementById('confirm-cancel').click()`)
	page.eval("left", box+`.querySelector('.policy-msg').textContent`, equals("Split of route split left as it was."))
	setSplit("60", "50")
	page.do("confirm 60/50", `document.getElementById('confirm-ok').click()`)
	page.eval("refusal shown", box+`.querySelector('.policy-msg').className + " " + `+box+`.querySelector('.policy-msg').textContent`,
		equals("policy-msg error Not saved: invalid policy:\n  \u2022 routes[0](split).destinations: weights sum to 110, want 100"))
	if b, err := store.Get(ctx, "Hello"); err != nil || !bytes.Equal(b, raw) {
		t.Fatalf("after a refused edit the store holds %s (%v)", b, err)
	}
	page.eval("version kept", box+`.querySelector('.policy-version').textContent`, equals("version web-1"))

	// 50/50: about half the calls move to v2.
	setSplit("50", "50")
	page.do("confirm 50/50", `document.getElementById('confirm-ok').click()`)
	page.eval("version web-2", box+`.querySelector('.policy-version').textContent`, equals("version web-2"))
	page.eval("split 50/50", weights, equals("v1=50,v2=50"))
	page.eval("saved", box+`.querySelector('.policy-msg').textContent`, contains("Saved version web-2 (was web-1)"))
	if got := traffic("web-2", 2000); got < 35 || got > 65 {
		t.Fatalf("v2 served %.1f%% of 2000 calls under 50/50", got)
	}
	// 0/100: all of it.
	setSplit("0", "100")
	page.do("confirm 0/100", `document.getElementById('confirm-ok').click()`)
	page.eval("version web-3", box+`.querySelector('.policy-version').textContent`, equals("version web-3"))
	if got := traffic("web-3", 400); got != 100 {
		t.Fatalf("v2 served %.1f%% under 0/100", got)
	}
	page.eval("watcher status after", box+`.querySelector('.policy-status').textContent`, equals("watcher: 3 applied, 0 refused"))

	// The whole document as text: an invalid one is refused with its
	// problem, nothing written.
	page.do("edit the document", `(() => { const b = `+box+`; b.querySelector('details.policy-text').open = true; const ta = b.querySelector('textarea.policy-doc'); const d = JSON.parse(ta.value); d.routes[0].destinations[1].weight = 90; ta.value = JSON.stringify(d, null, 2); b.querySelector('button.policy-save').click(); })()`)
	page.eval("document confirmation", `document.getElementById('confirm-text').textContent`, contains("Replace the policy of Hello (version web-3)"))
	page.do("confirm the document", `document.getElementById('confirm-ok').click()`)
	page.eval("document refused", box+`.querySelector('.policy-msg').textContent`,
		equals("Not saved: invalid policy:\n  \u2022 routes[0](split).destinations: weights sum to 90, want 100"))
	if b, err := store.Get(ctx, "Hello"); err != nil {
		t.Fatal(err)
	} else if got, err := policy.Decode(b); err != nil || got.Version != "web-3" {
		t.Fatalf("after a refused document the store holds %s (%v)", b, err)
	}

	// Nothing scrolls sideways at 360 px; a screenshot of the section at
	// 1280 px goes where TestDashboardBrowser's go.
	noHScroll := `(() => { const e = document.documentElement; return e.scrollWidth + "<=" + e.clientWidth + " " + (e.scrollWidth <= e.clientWidth); })()`
	for _, width := range []int64{360, 1280} {
		if err := chromedp.Do(page.ctx, chromedp.EmulateViewport(width, 900)); err != nil {
			t.Fatal(err)
		}
		page.eval(fmt.Sprintf("width %d", width), `String(document.documentElement.clientWidth)`, equals(fmt.Sprint(width)))
		page.eval(fmt.Sprintf("no horizontal scroll at %d px", width), noHScroll, func(s string) bool { return strings.HasSuffix(s, " true") })
	}
	png, err := chromedp.Run(page.ctx, chromedp.Screenshot("#policies"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(t.ArtifactDir(), "dashboard-policy.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	if dir := os.Getenv("FLEET_ARTIFACTS"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "dashboard-policy.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	if errs := page.consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors: %q", errs)
	}
}
