package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromiumPath finds Debian's chromium, which .ci/setup.d/50-chromium.sh
// installs.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("chromium is not installed: run .ci/services.sh (it sources .ci/setup.d/50-chromium.sh)")
	return ""
}

// TestDashboardBrowser drives the dashboard in headless Chromium against
// fleet demo --serve --load 200 (in process: three servers of Arith and
// Hello with weights 1, 2 and 3 in an embedded etcd), with no --service:
//   - the services are the ones the registry lists;
//   - load is shown per server (the figures servers report), each server
//     row naming its services, and the charts hold the history the
//     dashboard kept before the page opened;
//   - the call form fills in the zero-value template when the method
//     changes (and Hello.Say's template is accepted as it is), returns
//     Arith.Add's sum, and words bad input as fleet call does;
//   - disabling the last active instance of Arith asks first (cancel keeps
//     it), then names the state "all instances draining", and a call says
//     so; re-enabling one instance brings the method list back and the
//     form works again without a reload;
//   - at 800 and 360 px wide nothing scrolls sideways;
//   - the console shows no error (other than the HTTP statuses of the API
//     calls the test makes fail on purpose).
//
// It saves screenshots, dashboard.png (1280 px wide) and
// dashboard-360.png: into t.ArtifactDir() (kept with go test -artifacts),
// into $FLEET_ARTIFACTS when set (CI keeps them), and dashboard.png into
// docs/img when FLEET_UPDATE_SCREENSHOT=1.
func TestDashboardBrowser(t *testing.T) {
	exe := chromiumPath(t)
	// fleet demo --serve --load 200, in process, on random ports; the
	// dashboard sends the demo's admin token ($FLEET_TOKEN).
	t.Setenv(tokenEnv, "test-admin-token")
	pg, err := startPlayground(context.Background(), demoFlags{selector: "weighted", failMode: "failover",
		srv: serveFlags{serve: true, addr: "127.0.0.1:0", adminAddr: "127.0.0.1:0", load: 200}})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.stop()
	// No --service: the services are those the registry lists.
	d := newTestDashboard(t, &dashboardFlags{registry: pg.b.url, services: []string{}})
	hs := httptest.NewServer(d.handler())
	defer hs.Close()

	// The dashboard samples the load before any page asks: wait for a few
	// samples of every server, which the page must show at once.
	const kept = 4
	for deadline := time.Now().Add(20 * time.Second); ; {
		n := kept
		for _, a := range pg.addrs {
			n = min(n, len(d.hist.points(a)))
		}
		if n >= kept {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dashboard kept %d samples per server", n)
		}
		time.Sleep(100 * time.Millisecond)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	page, closePage := openBrowser(t, ctx, exe, hs.URL+"/")
	defer closePage() // stops the browser and removes its profile
	bctx, eval, do := page.ctx, page.eval, page.do
	equals := func(want string) func(string) bool { return func(s string) bool { return s == want } }
	contains := func(want string) func(string) bool { return func(s string) bool { return strings.Contains(s, want) } }
	// argsJSON is the argument box's JSON, compacted.
	const argsJSON = `(() => { const v = document.getElementById('call-args').value; try { return JSON.stringify(JSON.parse(v)); } catch (e) { return "not JSON: " + v; } })()`

	// History kept by the dashboard: the first rendering's charts already
	// hold the samples taken before the page opened.
	samples := eval("history on load", `String(Math.min(...Array.from(document.querySelectorAll('tr.server canvas.cps-chart')).map(c => +c.dataset.samples)))`,
		func(s string) bool { return s != "Infinity" })
	if n, _ := strconv.Atoi(samples); n < kept {
		t.Fatalf("the charts hold %s samples on load, want at least %d", samples, kept)
	}

	// Services from the registry, three instances each, weights 1, 2, 3.
	eval("services", `Array.from(document.querySelectorAll('#services [data-service]')).map(e => e.dataset.service).join(",")`, equals("Arith,Hello"))
	for _, svc := range []string{"Arith", "Hello"} {
		eval(svc+" weights", fmt.Sprintf(`Array.from(document.querySelectorAll('[data-service=%q] tr.instance td.weight')).map(e => e.textContent).sort().join(",")`, svc), equals("1,2,3"))
		eval(svc+" state", fmt.Sprintf(`document.querySelector('[data-service=%q] .service-state').textContent`, svc), equals("3 of 3 active"))
	}

	// Load per server, labelled so: one row per server naming both its
	// services, calls/s and p99 as numbers (some positive under load),
	// and no load column in the services' tables, where it would be
	// another service's.
	eval("servers", `Array.from(document.querySelectorAll('tr.server')).map(r => r.dataset.addr).sort().join(",")`, equals(strings.Join(slices.Sorted(slices.Values(pg.addrs)), ",")))
	eval("services per server", `Array.from(document.querySelectorAll('tr.server td.services')).every(e => e.textContent === "Arith, Hello") ? "both" : "not both"`, equals("both"))
	eval("per-server label", `document.querySelector('#servers h2').textContent + " / " + document.querySelector('#servers .note').textContent`, contains("per server, not per service"))
	eval("figures are numbers", `Array.from(document.querySelectorAll('tr.server td.cps, tr.server td.p99')).every(e => /^[0-9]+(\.[0-9]+)?$/.test(e.textContent)) ? "numbers" : "not numbers"`, equals("numbers"))
	eval("load shows", `Array.from(document.querySelectorAll('tr.server td.cps')).some(e => parseFloat(e.textContent) > 0) && Array.from(document.querySelectorAll('tr.server td.p99')).some(e => parseFloat(e.textContent) > 0) ? "some" : "none"`, equals("some"))
	eval("no load per service row", `String(document.querySelectorAll('#services td.cps, #services td.p99, #services canvas').length)`, equals("0"))

	// The form: Arith.Add's template on load, Hello.Say's when the
	// service changes; the template is accepted as it is.
	eval("methods", `Array.from(document.querySelectorAll('#call-method option')).map(o => o.value).join(",")`, equals("Add,Div,Mul"))
	eval("Add template", argsJSON, equals(`{"A":0,"B":0}`))
	do("choose Hello", `(() => { const s = document.getElementById('call-service'); s.value = "Hello"; s.dispatchEvent(new Event("change")); })()`)
	eval("Say template", `document.getElementById('call-types').dataset.method + " " + document.getElementById('call-args').value`,
		func(s string) bool { return strings.HasPrefix(s, "Hello.Say ") && strings.Contains(s, `"field1": ""`) })
	do("call Say", `document.getElementById('call-submit').click()`)
	eval("Say answers its template", `document.getElementById('call-status').textContent`, func(s string) bool { return strings.HasPrefix(s, "ok from ") })
	do("choose Arith", `(() => { const s = document.getElementById('call-service'); s.value = "Arith"; s.dispatchEvent(new Event("change")); })()`)
	eval("Arith methods back", `Array.from(document.querySelectorAll('#call-method option')).map(o => o.value).join(",")`, equals("Add,Div,Mul"))
	do("choose Mul", `(() => { const s = document.getElementById('call-method'); s.value = "Mul"; document.getElementById('call-args').value = "typed"; s.dispatchEvent(new Event("change")); })()`)
	eval("Mul template", `document.getElementById('call-types').dataset.method + " " + `+argsJSON, equals(`Arith.Mul {"A":0,"B":0}`))
	if err := chromedp.Do(bctx,
		chromedp.SetValue(chromedp.CSS("#call-args"), `{"A":6,"B":7}`),
		chromedp.Click(chromedp.CSS("#call-submit")),
	); err != nil {
		t.Fatal(err)
	}
	eval("call result", `document.getElementById('call-result').textContent`, equals("42"))

	// Bad input: fleet call's own words and exit status.
	arith, err := openTarget(pg.b.url+"/Arith", &connFlags{timeout: 10 * time.Second, selector: "p2c", failMode: "failover"})
	if err != nil {
		t.Fatal(err)
	}
	defer arith.close()
	_, cliErr := doCallChecked(ctx, arith, "auto", "Arith.Mul", []byte(`{"A":19,`), false)
	if exitStatus(cliErr) != exitUsage {
		t.Fatalf("fleet call with bad JSON: %v (exit status %d)", cliErr, exitStatus(cliErr))
	}
	if err := chromedp.Do(bctx,
		chromedp.SetValue(chromedp.CSS("#call-args"), `{"A":19,`),
		chromedp.Click(chromedp.CSS("#call-submit")),
	); err != nil {
		t.Fatal(err)
	}
	eval("bad JSON status", `document.getElementById('call-status').textContent`, equals("exit status 2 (bad input, not sent)"))
	eval("bad JSON message", `document.getElementById('call-result').textContent`, equals("fleet: "+cliErr.Error()))

	// Disable every instance of Arith. The first two go at once; the
	// last one asks first, and Cancel keeps it active.
	row := func(addr string) string {
		return fmt.Sprintf(`document.querySelector('[data-service="Arith"] tr[data-addr=%q]')`, addr)
	}
	dialogOpen := `String(document.getElementById('confirm').open)`
	for _, a := range pg.addrs[:2] {
		do("disable "+a, row(a)+`.querySelector('button.toggle').click()`)
		eval("no confirmation for "+a, dialogOpen, equals("false"))
		eval("disabled "+a, row(a)+`.querySelector('td.state').textContent`, equals("draining"))
	}
	last := pg.addrs[2]
	eval("Arith state", `document.querySelector('[data-service="Arith"] .service-state').textContent`, equals("1 of 3 active"))
	do("disable the last", row(last)+`.querySelector('button.toggle').click()`)
	eval("confirmation", dialogOpen, equals("true"))
	eval("confirmation text", `document.getElementById('confirm-text').textContent`, contains("last active instance of Arith"))
	do("cancel", `document.getElementById('confirm-cancel').click()`)
	eval("dialog closed", dialogOpen, equals("false"))
	time.Sleep(1500 * time.Millisecond) // a steer would show within a poll
	eval("still active", row(last)+`.querySelector('td.state').textContent`, equals("active"))
	do("disable the last again", row(last)+`.querySelector('button.toggle').click()`)
	eval("confirmation again", dialogOpen, equals("true"))
	do("confirm", `document.getElementById('confirm-ok').click()`)
	eval("last disabled", row(last)+`.querySelector('td.state').textContent`, equals("draining"))
	eval("all draining named", `document.querySelector('[data-service="Arith"] .service-state').textContent`, equals("all instances draining"))
	eval("Hello unaffected", `document.querySelector('[data-service="Hello"] .service-state').textContent`, equals("3 of 3 active"))
	eval("the form warns", `document.getElementById('call-status').textContent`, equals("Arith: all instances draining; calls fail until one is enabled"))

	// A call now says why it cannot be made.
	if err := chromedp.Do(bctx,
		chromedp.SetValue(chromedp.CSS("#call-args"), `{"A":1,"B":2}`),
		chromedp.Click(chromedp.CSS("#call-submit")),
	); err != nil {
		t.Fatal(err)
	}
	eval("draining call status", `document.getElementById('call-status').textContent`, equals("exit status 78 (unavailable)"))
	eval("draining call message", `document.getElementById('call-result').textContent`, contains(`all 3 instances of service "Arith" are draining`))
	// Choosing Arith again finds no method to list while it drains.
	do("choose Hello", `(() => { const s = document.getElementById('call-service'); s.value = "Hello"; s.dispatchEvent(new Event("change")); })()`)
	eval("Hello methods", `Array.from(document.querySelectorAll('#call-method option')).map(o => o.value).join(",")`, equals("Say"))
	do("choose Arith", `(() => { const s = document.getElementById('call-service'); s.value = "Arith"; s.dispatchEvent(new Event("change")); })()`)
	eval("no methods while draining", `String(document.querySelectorAll('#call-method option').length) + " " + document.getElementById('call-status').textContent`,
		func(s string) bool { return strings.HasPrefix(s, "0 ") && strings.Contains(s, "draining") })

	// Enable one: the method list and the form recover without a reload.
	do("enable", row(last)+`.querySelector('button.toggle').click()`)
	eval("enabled", row(last)+`.querySelector('td.state').textContent`, equals("active"))
	eval("Arith active again", `document.querySelector('[data-service="Arith"] .service-state').textContent`, equals("1 of 3 active"))
	eval("methods back", `Array.from(document.querySelectorAll('#call-method option')).map(o => o.value).join(",")`, equals("Add,Div,Mul"))
	eval("status recovered", `document.getElementById('call-status').className`, equals("muted"))
	eval("template back", argsJSON, equals(`{"A":0,"B":0}`))
	if err := chromedp.Do(bctx,
		chromedp.SetValue(chromedp.CSS("#call-args"), `{"A":1,"B":2}`),
		chromedp.Click(chromedp.CSS("#call-submit")),
	); err != nil {
		t.Fatal(err)
	}
	eval("call after recovery", `document.getElementById('call-result').textContent`, equals("3"))
	for _, a := range pg.addrs[:2] {
		do("enable "+a, row(a)+`.querySelector('button.toggle').click()`)
		eval("enabled "+a, row(a)+`.querySelector('td.state').textContent`, equals("active"))
	}
	eval("all active", `document.querySelector('[data-service="Arith"] .service-state').textContent`, equals("3 of 3 active"))

	// No sideways scroll at 800 and 360 px; screenshots at 360 and 1280.
	noHScroll := `(() => { const e = document.documentElement; return e.scrollWidth + "<=" + e.clientWidth + " " + (e.scrollWidth <= e.clientWidth); })()`
	shots := map[string][]byte{}
	for _, w := range []int64{800, 360, 1280} {
		if err := chromedp.Do(bctx, chromedp.EmulateViewport(w, 900)); err != nil {
			t.Fatal(err)
		}
		eval(fmt.Sprintf("width %d", w), `String(document.documentElement.clientWidth)`, equals(strconv.FormatInt(w, 10)))
		eval(fmt.Sprintf("no horizontal scroll at %d px", w), noHScroll, func(s string) bool { return strings.HasSuffix(s, " true") })
		if w == 800 {
			continue
		}
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if len(png) < 8 || string(png[1:4]) != "PNG" {
			t.Fatalf("screenshot is not a PNG (%d bytes)", len(png))
		}
		name := "dashboard.png"
		if w == 360 {
			name = "dashboard-360.png"
		}
		shots[name] = png
	}

	if errs := page.consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors: %q", errs)
	}

	for name, png := range shots {
		// go test -artifacts keeps them under the output directory.
		if err := os.WriteFile(filepath.Join(t.ArtifactDir(), name), png, 0o644); err != nil {
			t.Fatal(err)
		}
		if dir := os.Getenv("FLEET_ARTIFACTS"); dir != "" {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if os.Getenv("FLEET_UPDATE_SCREENSHOT") == "1" {
		if err := os.WriteFile(filepath.Join("..", "..", "docs", "img", "dashboard.png"), shots["dashboard.png"], 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// browserPage is a page of headless Chromium, and the console errors it
// logged (other than the HTTP statuses of API requests made to fail).
type browserPage struct {
	t   *testing.T
	ctx context.Context // the page's chromedp context

	mu   sync.Mutex
	errs []string
}

// openBrowser starts Chromium (exe) at 1280×860 and opens url; close
// stops the browser and removes its profile.
func openBrowser(t *testing.T, ctx context.Context, exe, url string) (p *browserPage, close func()) {
	t.Helper()
	actx, acancel := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 860),
	)
	bctx, bcancel := chromedp.NewContext(actx)
	close = func() { bcancel(); acancel() }
	p = &browserPage{t: t, ctx: bctx}
	// Console errors, collected from before the page loads.
	messages := chromedp.Console(bctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type != chromedp.ConsoleError && m.Type != chromedp.ConsoleException {
				continue
			}
			// The API answers the failures the test provokes with 4xx
			// and 5xx statuses, which the browser logs as network errors.
			if m.Source == "network" && strings.Contains(m.URL, "/api/") {
				continue
			}
			p.mu.Lock()
			p.errs = append(p.errs, m.String()+" ("+m.URL+")")
			p.mu.Unlock()
		}
	}()
	if err := chromedp.Do(bctx, chromedp.Navigate(url)); err != nil {
		close()
		t.Fatal(err)
	}
	return p, close
}

// eval evaluates js until ok accepts its result (bounded by 20 s).
func (p *browserPage) eval(what, js string, ok func(string) bool) string {
	p.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](js))
		if err != nil {
			p.t.Fatalf("%s: %v", what, err)
		}
		if ok(got) {
			return got
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s: page shows %q", what, got)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// do runs js once.
func (p *browserPage) do(what, js string) {
	p.t.Helper()
	p.eval(what, "("+js+`, "done")`, func(s string) bool { return s == "done" })
}

// consoleErrors returns the console errors logged so far.
func (p *browserPage) consoleErrors() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.errs)
}
