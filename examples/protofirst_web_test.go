package examples_test

import (
	"bufio"
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
// Then with no schema, which buf curl asks the gateway's reflection for,
// over the call's own protocol (gRPC, Connect or gRPC-Web) and over
// cleartext HTTP/2 whatever the flags say (reflection is a bidi stream);
// the gateway, with its default options, sends an h2c connection whose
// first request is Connect or gRPC-Web to net/http. --list-services lists
// the service over each protocol. An error reaches buf curl with its code
// and message.
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
		{"reflection, connect", []string{"--protocol", "connect"}},
		{"reflection, grpcweb", []string{"--protocol", "grpcweb"}},
		{"reflection, connect, h2c", []string{"--protocol", "connect", "--http2-prior-knowledge"}},
		{"reflection, grpcweb, h2c", []string{"--protocol", "grpcweb", "--http2-prior-knowledge"}},
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
	var want []string
	for range 7 {
		want = append(want, "Ada", "Bo", "Cy")
	}
	if got := g.called(); !slices.Equal(got, want) {
		t.Errorf("the service saw %q, want %q", got, want)
	}
	for _, protocol := range []string{"grpc", "connect", "grpcweb"} {
		out, err := runTool(t, "protofirst", buf, "curl", "--protocol", protocol, "--http2-prior-knowledge", "--list-services", "http://"+addr)
		if err != nil || !slices.Contains(strings.Split(out, "\n"), "greeter.v1.GreeterService") {
			t.Errorf("buf curl --protocol %s --list-services: %v\n%s", protocol, err, out)
		}
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

	bctx := newBrowser(t, exe)
	open := func(origin string) { t.Helper(); openPage(t, bctx, origin+"/index.html?gateway="+gw) }
	press := func(protocol, name, times, button string) pageResult {
		t.Helper()
		return pressButton(t, bctx, protocol, name, times, button)
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
		// connect-es reports fetch's TypeError (Chromium: "Failed to
		// fetch") as Unknown.
		if want := "error: Unknown: Failed to fetch"; len(got.Lines) != 0 || got.Status != want {
			t.Errorf("%s from %s (not allowed): the page shows %+v, want status %q", protocol, other.URL, got, want)
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

// newBrowser starts headless Chromium (exe) for the test, which it
// stops at the test's end, and returns the context of its tab.
func newBrowser(t *testing.T, exe string) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
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
	t.Cleanup(acancel)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(bcancel)
	return bctx
}

// openPage loads the page at url and waits until its script runs.
func openPage(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, ctx, "ready")
}

// pressButton fills the page's form (protocol "connect" or "grpcweb",
// name, times) and presses button ("say" or "greet"), then returns what
// the page shows once the call ends.
func pressButton(t *testing.T, ctx context.Context, protocol, name, times, button string) pageResult {
	t.Helper()
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.ID("protocol"), protocol),
		chromedp.SetValue(chromedp.ID("name"), name),
		chromedp.SetValue(chromedp.ID("times"), times),
		chromedp.Click(chromedp.ID(button)),
	); err != nil {
		t.Fatal(err)
	}
	status := waitStatus(t, ctx, "")
	lines, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#out li")].map(li => li.textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	return pageResult{Lines: lines, Status: status}
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

// TestProtofirstProgram builds examples/protofirst and runs it twice.
// Without flags it prints what TestPrograms expects (the generated client
// over TCP, in process and through an XClient with a registry). With
// -serve (on ports of its choosing) it is called as docs/proto-first.md
// shows: buf curl over Connect and gRPC-Web with the .proto as schema,
// and the page it serves (embedded from web/, and only under its own
// host) in Chromium, which the gateway allows; on SIGINT it shuts down
// and exits 0.
func TestProtofirstProgram(t *testing.T) {
	buf := external(t, "buf", "70-protogen.sh")
	exe := chromiumPath(t)
	bin := filepath.Join(t.TempDir(), "protofirst")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	if out, err := runTool(t, ".", "go", append(args, "./protofirst")...); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	i := slices.IndexFunc(programs, func(p program) bool { return p.dir == "protofirst" })
	if out, err := runTool(t, ".", bin); err != nil {
		t.Errorf("protofirst: %v\n%s", err, out)
	} else if got, want := strings.TrimRight(out, "\n"), strings.Join(programs[i].want, "\n"); got != want {
		t.Errorf("protofirst printed:\n%s\nwant:\n%s", got, want)
	}

	cmd := exec.Command(bin, "-serve", "-addr", "127.0.0.1:0", "-page", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 2)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		exited <- cmd.Wait()
	}()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			t.Errorf("SIGINT: %v", err)
		}
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("-serve after SIGINT: %v\n%s", err, stderr.Bytes())
			}
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("-serve did not exit within 10 s of SIGINT\n%s", stderr.Bytes())
		}
	}
	defer stop()
	var gw, page string
	for gw == "" || page == "" {
		select {
		case l := <-lines:
			if v, ok := strings.CutPrefix(l, "gateway: "); ok {
				gw = v
			} else if v, ok := strings.CutPrefix(l, "page: "); ok {
				page = v
			} else {
				t.Fatalf("-serve printed %q", l)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("-serve printed no addresses within 20 s\n%s", stderr.Bytes())
		}
	}
	if want := "/?gateway=" + gw; !strings.HasSuffix(page, want) {
		t.Fatalf("page URL %q does not end in %q", page, want)
	}

	schema := []string{"--schema", "proto/greeter/v1/greeter.proto"}
	msgs, out, err := bufCurl(t, buf, append(slices.Clone(schema), "--protocol", "connect", "--data", `{"name":"Ada"}`, gw+"/greeter.v1.GreeterService/SayHello")...)
	if got := messages(msgs); err != nil || !slices.Equal(got, []string{"hello, Ada"}) {
		t.Errorf("buf curl --protocol connect SayHello: %v %q\n%s", err, got, out)
	}
	msgs, out, err = bufCurl(t, buf, append(slices.Clone(schema), "--protocol", "grpcweb", "--data", `{"name":"Ada","times":2}`, gw+"/greeter.v1.GreeterService/GreetMany")...)
	if got := messages(msgs); err != nil || !slices.Equal(got, []string{"hello #1, Ada", "hello #2, Ada"}) {
		t.Errorf("buf curl --protocol grpcweb GreetMany: %v %q\n%s", err, got, out)
	}

	// The page is served only under the origin the gateway allows.
	origin, _, _ := strings.Cut(page, "/?")
	req, err := http.NewRequest(http.MethodGet, origin+"/index.html", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "localhost"
	hc := &http.Client{Timeout: 10 * time.Second}
	defer hc.CloseIdleConnections()
	if resp, err := hc.Do(req); err != nil {
		t.Error(err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != http.StatusMisdirectedRequest {
			t.Errorf("the page under Host localhost: %s, want 421", resp.Status)
		}
	}

	bctx := newBrowser(t, exe)
	openPage(t, bctx, page)
	for _, c := range []struct {
		protocol, button string
		want             pageResult
	}{
		{"connect", "say", pageResult{[]string{"hello, Ada"}, "done"}},
		{"grpcweb", "greet", pageResult{[]string{"hello #1, Ada", "hello #2, Ada"}, "done"}},
	} {
		if got := pressButton(t, bctx, c.protocol, "Ada", "2", c.button); !slices.Equal(got.Lines, c.want.Lines) || got.Status != c.want.Status {
			t.Errorf("page, %s %s: shows %+v, want %+v", c.protocol, c.button, got, c.want)
		}
	}
	stop()
}
