package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
// Hello with weights 1, 2 and 3 in an embedded etcd): the page
// lists the instances with their weights and each one's p99 (a number,
// positive under load, with its chart), the call form returns Arith.Add's
// sum, malformed JSON gets a clear error in the page, a
// weight changes, and disabling an instance moves the traffic off it
// (in the page and in the server's own count) until it is enabled. It
// saves a screenshot: into t.ArtifactDir() (kept with go test -artifacts),
// into $FLEET_ARTIFACTS when set (CI keeps it), and into
// docs/img/dashboard.png when FLEET_UPDATE_SCREENSHOT=1.
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
	d := newTestDashboard(t, &dashboardFlags{registry: pg.b.url})
	hs := httptest.NewServer(d.handler())
	defer hs.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
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
	defer acancel() // stops the browser and removes its profile
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()

	if err := chromedp.Do(bctx, chromedp.Navigate(hs.URL+"/")); err != nil {
		t.Fatal(err)
	}
	// eval evaluates js until it returns want (bounded by 20 s).
	eval := func(what, js string, ok func(string) bool) string {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			got, err := chromedp.Run(bctx, chromedp.Evaluate[string](js))
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if ok(got) {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: page shows %q", what, got)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	equals := func(want string) func(string) bool { return func(s string) bool { return s == want } }

	// Three instances of each service, with weights 1, 2 and 3.
	for _, svc := range []string{"Arith", "Hello"} {
		eval(svc+" weights", fmt.Sprintf(`Array.from(document.querySelectorAll('[data-service=%q] tr.instance td.weight')).map(e => e.textContent).sort().join(",")`, svc), equals("1,2,3"))
	}
	addrs := eval("addresses", `Array.from(document.querySelectorAll('[data-service="Arith"] tr.instance td.addr')).map(e => e.textContent).sort().join(",")`, func(s string) bool { return s != "" })
	for _, a := range pg.addrs {
		if !strings.Contains(addrs, a) {
			t.Fatalf("page lists %s, not %s", addrs, a)
		}
	}

	// p99 per instance: every row shows a number, and under load some
	// Arith instance reports a positive one, with its chart.
	eval("p99 cells", `Array.from(document.querySelectorAll('tr.instance td.p99')).every(e => /^[0-9]+(\.[0-9]+)?$/.test(e.textContent)) ? "numbers" : "not numbers"`, equals("numbers"))
	eval("p99 under load", `Array.from(document.querySelectorAll('[data-service="Arith"] tr.instance td.p99')).some(e => parseFloat(e.textContent) > 0) ? "some" : "none"`, equals("some"))
	eval("p99 charts", `String(document.querySelectorAll('[data-service="Arith"] tr.instance canvas.p99-chart').length)`, equals("3"))

	// The call form: Arith.Add's sum.
	eval("methods", `Array.from(document.querySelectorAll('#call-method option')).map(o => o.value).join(",")`, equals("Add,Div,Mul"))
	if err := chromedp.Do(bctx,
		chromedp.SetValue(chromedp.CSS("#call-service"), "Arith"),
		chromedp.SetValue(chromedp.CSS("#call-method"), "Add"),
		chromedp.SetValue(chromedp.CSS("#call-args"), `{"A":19,"B":23}`),
		chromedp.Click(chromedp.CSS("#call-submit")),
	); err != nil {
		t.Fatal(err)
	}
	eval("call result", `document.getElementById('call-result').textContent`, equals("42"))
	eval("call status", `document.getElementById('call-status').textContent`, func(s string) bool { return strings.HasPrefix(s, "ok from ") })

	// Malformed JSON: a clear message, and the page keeps working.
	if err := chromedp.Do(bctx,
		chromedp.SetValue(chromedp.CSS("#call-args"), `{"A":19,`),
		chromedp.Click(chromedp.CSS("#call-submit")),
	); err != nil {
		t.Fatal(err)
	}
	eval("bad JSON status", `document.getElementById('call-status').textContent`, equals("unknown (exit status 2)"))
	eval("bad JSON message", `document.getElementById('call-result').textContent`, func(s string) bool { return strings.Contains(s, "not valid JSON") })

	// Steering in the page: one more weight, then disable the instance
	// of weight 1: its calls/s falls to zero in the page and in the
	// server's own count; enabling it brings traffic back.
	row := func(addr string) string {
		return fmt.Sprintf(`document.querySelector('[data-service="Arith"] tr[data-addr=%q]')`, addr)
	}
	victim := pg.addrs[0] // weight 1
	srv := pg.servers[0]
	click := func(what, button string) {
		t.Helper()
		eval(what, row(victim)+`.querySelector('button.`+button+`').click() || "clicked"`, equals("clicked"))
	}
	click("weight up", "weight-up")
	eval("new weight", row(victim)+`.querySelector('td.weight').textContent`, equals("2"))
	click("disable", "toggle")
	eval("disabled state", row(victim)+`.querySelector('td.state').textContent`, equals("draining"))
	eval("no traffic in the page", row(victim)+`.querySelector('td.cps').textContent`, equals("0.0"))
	quiet := func() bool {
		_, before := srv.Load()
		time.Sleep(700 * time.Millisecond)
		_, after := srv.Load()
		return after == before
	}
	deadline := time.Now().Add(20 * time.Second)
	for !quiet() {
		if time.Now().After(deadline) {
			t.Fatal("the disabled server still counts new calls")
		}
	}
	click("enable", "toggle")
	eval("enabled state", row(victim)+`.querySelector('td.state').textContent`, equals("active"))
	eval("traffic back in the page", row(victim)+`.querySelector('td.cps').textContent`, func(s string) bool { return s != "" && s != "0.0" })
	click("weight down", "weight-down")
	eval("weight back", row(victim)+`.querySelector('td.weight').textContent`, equals("1"))

	// A last good call for the screenshot; give the load a moment to show
	// in the charts (not asserted: the figures depend on the machine).
	if err := chromedp.Do(bctx,
		chromedp.SetValue(chromedp.CSS("#call-args"), `{"A":1,"B":2}`),
		chromedp.Click(chromedp.CSS("#call-submit")),
	); err != nil {
		t.Fatal(err)
	}
	eval("second call", `document.getElementById('call-result').textContent`, equals("3"))
	waitUntil := time.Now().Add(5 * time.Second)
	for time.Now().Before(waitUntil) {
		busy, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`Array.from(document.querySelectorAll('td.cps')).some(e => parseFloat(e.textContent) > 0)`))
		if err != nil || busy {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if len(png) < 8 || string(png[1:4]) != "PNG" {
		t.Fatalf("screenshot is not a PNG (%d bytes)", len(png))
	}
	// go test -artifacts keeps it under the output directory.
	if err := os.WriteFile(filepath.Join(t.ArtifactDir(), "dashboard.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	if dir := os.Getenv("FLEET_ARTIFACTS"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "dashboard.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if os.Getenv("FLEET_UPDATE_SCREENSHOT") == "1" {
		if err := os.WriteFile(filepath.Join("..", "..", "docs", "img", "dashboard.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
