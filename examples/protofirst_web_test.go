package examples_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/fleetrpc/fleet/gateway"
)

// The tests of examples/protofirst with the clients of other languages:
// buf curl over Connect and gRPC-Web, and the page under
// examples/protofirst/web (connect-es, bundled into app.js) in Chromium.

// bufCurl runs `buf curl` in examples/protofirst with args and returns
// the messages it printed (one JSON object each) and its error.
func bufCurl(t *testing.T, buf string, args ...string) ([]map[string]any, string, error) {
	t.Helper()
	out, err := runTool(t, "protofirst", buf, append([]string{"curl"}, args...)...)
	var msgs []map[string]any
	if err == nil {
		dec := json.NewDecoder(strings.NewReader(out))
		for {
			var m map[string]any
			if derr := dec.Decode(&m); derr == io.EOF {
				break
			} else if derr != nil {
				t.Fatalf("buf curl %s printed what is not JSON (%v):\n%s", strings.Join(args, " "), derr, out)
			}
			msgs = append(msgs, m)
		}
	}
	return msgs, out, err
}

// messages returns the "message" field of each of msgs.
func messages(msgs []map[string]any) []string {
	var s []string
	for _, m := range msgs {
		v, _ := m["message"].(string)
		s = append(s, v)
	}
	return s
}

// TestProtofirstBufCurl calls the generated service through the gateway
// with buf curl (npm @bufbuild/buf, installed by 70-protogen.sh): over
// Connect and gRPC-Web, the unary SayHello and the server stream
// GreetMany, with the schema read from the example's .proto (--schema).
// Then with no schema, which buf curl asks the gateway's reflection for:
// it calls reflection over the call's protocol, and the gateway serves
// reflection over gRPC only, so that is --protocol grpc (over HTTP/2, as
// reflection is a bidi stream), which also lists the services. An error
// reaches buf curl with its code and message.
func TestProtofirstBufCurl(t *testing.T) {
	buf := external(t, "buf", "70-protogen.sh")
	addr, g := startGreeter(t)
	base := "http://" + addr + "/greeter.v1.GreeterService/"
	schema := []string{"--schema", "proto/greeter/v1/greeter.proto"}
	for _, c := range []struct {
		name string
		args []string
	}{
		{"schema, connect", append(slices.Clone(schema), "--protocol", "connect")},
		{"schema, grpcweb", append(slices.Clone(schema), "--protocol", "grpcweb")},
		{"reflection, grpc", []string{"--protocol", "grpc", "--http2-prior-knowledge"}},
	} {
		msgs, out, err := bufCurl(t, buf, append(slices.Clone(c.args), "--data", `{"name":"Ada"}`, base+"SayHello")...)
		if err != nil {
			t.Errorf("%s: SayHello: %v\n%s", c.name, err, out)
		} else if got := messages(msgs); !slices.Equal(got, []string{"hello, Ada"}) {
			t.Errorf("%s: SayHello printed %q", c.name, got)
		}
		msgs, out, err = bufCurl(t, buf, append(slices.Clone(c.args), "--data", `{"name":"Bo","times":3}`, base+"GreetMany")...)
		if err != nil {
			t.Errorf("%s: GreetMany: %v\n%s", c.name, err, out)
		} else if got := messages(msgs); !slices.Equal(got, []string{"1 Bo", "2 Bo", "3 Bo"}) {
			t.Errorf("%s: GreetMany printed %q", c.name, got)
		}
		_, out, err = bufCurl(t, buf, append(slices.Clone(c.args), "--data", `{"name":"Cy","times":11}`, base+"GreetMany")...)
		if err == nil || !strings.Contains(out, "invalid_argument") || !strings.Contains(out, "times must be 1 to 10, not 11") {
			t.Errorf("%s: GreetMany with times 11: %v\n%s", c.name, err, out)
		}
	}
	want := []string{"Ada", "Bo", "Cy", "Ada", "Bo", "Cy", "Ada", "Bo", "Cy"}
	if got := g.called(); !slices.Equal(got, want) {
		t.Errorf("the service saw %q, want %q", got, want)
	}
	out, err := runTool(t, "protofirst", buf, "curl", "--protocol", "grpc", "--http2-prior-knowledge", "--list-services", "http://"+addr)
	if err != nil || !slices.Contains(strings.Split(out, "\n"), "greeter.v1.GreeterService") {
		t.Errorf("buf curl --list-services: %v\n%s", err, out)
	}
}

// TestProtofirstWebBundle checks that the committed
// examples/protofirst/web/app.js is what web/build.sh (esbuild) writes
// from web/client.js.
func TestProtofirstWebBundle(t *testing.T) {
	esbuild, err := filepath.Abs(filepath.Join("..", "conformance", "testdata", "web", "node_modules", ".bin", "esbuild"))
	if err != nil {
		t.Fatal(err)
	}
	if !fileExists(esbuild) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s missing; .ci/setup.d/61-conformance.sh installs it (bash .ci/services.sh)", esbuild)
		}
		t.Skipf("%s missing; .ci/setup.d/61-conformance.sh installs it (bash .ci/services.sh)", esbuild)
	}
	fresh := filepath.Join(t.TempDir(), "app.js")
	if out, err := runTool(t, ".", "bash", filepath.Join("protofirst", "web", "build.sh"), fresh); err != nil {
		t.Fatalf("web/build.sh: %v\n%s", err, out)
	}
	want, err := os.ReadFile(fresh)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("protofirst", "web", "app.js"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the committed web/app.js is not what web/build.sh writes from web/client.js: run bash examples/protofirst/web/build.sh")
	}
}

// pageResult is what the page shows after a call: the lines of #out and
// the text of #status.
type pageResult struct {
	Lines  []string
	Status string
}

// TestProtofirstBrowser opens examples/protofirst/web/index.html in
// headless Chromium, served from one origin, and has it call the
// generated service through a gateway on another origin that allows the
// page's (gateway.WithCORS): SayHello and GreetMany over Connect and over
// gRPC-Web, and an error's code and message. The same page served from an
// origin the gateway does not allow is refused by the browser, and its
// call never reaches the service.
func TestProtofirstBrowser(t *testing.T) {
	exe := chromiumPath(t)
	files := http.FileServer(http.Dir(filepath.Join("protofirst", "web")))
	page := httptest.NewServer(files)
	defer page.Close()
	other := httptest.NewServer(files)
	defer other.Close()
	addr, g := startGreeter(t, gateway.WithCORS(gateway.CORS{AllowedOrigins: []string{page.URL}}))
	gw := "http://" + addr

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
	)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()

	// open loads the page from origin and waits until its script runs.
	open := func(origin string) {
		t.Helper()
		if err := chromedp.Do(bctx, chromedp.Navigate(origin+"/index.html?gateway="+gw)); err != nil {
			t.Fatal(err)
		}
		waitStatus(t, bctx, "ready")
	}
	// press sets the form and presses button, then returns what the page
	// shows once the call ends.
	press := func(protocol, name, times, button string) pageResult {
		t.Helper()
		if err := chromedp.Do(bctx,
			chromedp.SetValue(chromedp.ID("protocol"), protocol),
			chromedp.SetValue(chromedp.ID("name"), name),
			chromedp.SetValue(chromedp.ID("times"), times),
			chromedp.Click(chromedp.ID(button)),
		); err != nil {
			t.Fatal(err)
		}
		status := waitStatus(t, bctx, "")
		lines, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#out li")].map(li => li.textContent)`))
		if err != nil {
			t.Fatal(err)
		}
		return pageResult{Lines: lines, Status: status}
	}

	open(page.URL)
	for _, protocol := range []string{"connect", "grpcweb"} {
		for _, c := range []struct {
			name, times, button string
			want                pageResult
		}{
			{"Ada", "1", "say", pageResult{[]string{"hello, Ada"}, "done"}},
			{"Bo", "3", "greet", pageResult{[]string{"1 Bo", "2 Bo", "3 Bo"}, "done"}},
			{"Cy", "11", "greet", pageResult{nil, "error: InvalidArgument: times must be 1 to 10, not 11"}},
		} {
			got := press(protocol, c.name, c.times, c.button)
			if !slices.Equal(got.Lines, c.want.Lines) || got.Status != c.want.Status {
				t.Errorf("%s %s(%s, %s): the page shows %+v, want %+v", protocol, c.button, c.name, c.times, got, c.want)
			}
		}
	}

	// The same page from an origin the gateway does not allow: the
	// browser's preflight is not answered with that origin, so the call
	// is not sent.
	open(other.URL)
	for _, protocol := range []string{"connect", "grpcweb"} {
		got := press(protocol, "Mallory", "2", "greet")
		if len(got.Lines) != 0 || !strings.HasPrefix(got.Status, "error: ") {
			t.Errorf("%s from %s (not allowed): the page shows %+v, want an error", protocol, other.URL, got)
		}
	}
	if slices.Contains(g.called(), "Mallory") {
		t.Errorf("a call from an origin the gateway does not allow reached the service: %q", g.called())
	}
	want := []string{"Ada", "Bo", "Cy", "Ada", "Bo", "Cy"}
	if got := g.called(); !slices.Equal(got, want) {
		t.Errorf("the service saw %q, want %q", got, want)
	}
}

// waitStatus waits up to 20 s for the page's #status to read want (or,
// with want "", anything but "calling") and returns it.
func waitStatus(t *testing.T, ctx context.Context, want string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("status")))
		if err != nil {
			t.Fatal(err)
		}
		if (want == "" && s != "calling") || (want != "" && s == want) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page's status is %q after 20 s, want %q (\"\": the end of the call)", s, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// chromiumPath finds Debian's chromium, which .ci/setup.d/50-chromium.sh
// installs; without it the test fails under CI and skips elsewhere.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed: run .ci/services.sh (it sources .ci/setup.d/50-chromium.sh)")
	}
	t.Skip("chromium is not installed: run .ci/services.sh (it sources .ci/setup.d/50-chromium.sh)")
	return ""
}
