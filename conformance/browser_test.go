package conformance_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/gateway"
	"github.com/fleetrpc/fleet/server"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// webDir holds the Node packages of the browser and buf curl tests,
// installed by .ci/setup.d/61-conformance.sh (npm ci).
const webDir = "testdata/web"

// webTool returns the path of a tool installed by npm in webDir.
func webTool(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join(webDir, "node_modules", ".bin", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is not installed in %s: run `bash -c 'log(){ echo $*; }; die(){ exit 1; }; source .ci/setup.d/61-conformance.sh'` from the repository root", name, webDir)
	}
	return p
}

// startEcho serves fleet.test.Echo (echo.proto) behind a gateway on
// 127.0.0.1 until the test ends, and returns its base URL. Upper echoes
// metadata "x-k" as response metadata "echo".
func startEcho(t *testing.T, gopts ...gateway.Option) string {
	t.Helper()
	srv := server.New(server.WithLogger(slog.New(slog.DiscardHandler)))
	if err := server.Handle(srv, "fleet.test.Echo", "Upper", func(ctx context.Context, in *wrapperspb.StringValue, out *wrapperspb.StringValue) error {
		if in.GetValue() == "fail" {
			return fleet.NewError(fleet.InvalidArgument, "fail as asked")
		}
		if v := fleet.IncomingMetadata(ctx)["x-k"]; v != "" {
			fleet.SetResponseMetadata(ctx, "echo", v)
		}
		out.Value = strings.ToUpper(in.GetValue())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := server.HandleServerStream(srv, "fleet.test.Echo", "Count", func(ctx context.Context, in *wrapperspb.Int32Value, st *server.ServerStream[wrapperspb.StringValue]) error {
		for i := range in.GetValue() {
			if err := st.Send(wrapperspb.String(strconv.Itoa(int(i)))); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	g := gateway.New(srv, append([]gateway.Option{gateway.WithLogger(slog.New(slog.DiscardHandler))}, gopts...)...)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- g.Serve(lis) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := g.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-done; !errors.Is(err, gateway.ErrClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return "http://" + lis.Addr().String()
}

// TestBrowserConnectES loads a connect-es page (testdata/web/client.js,
// bundled with esbuild) in headless Chromium from one origin and has it
// call a gateway on another, which allows that origin (WithCORS): Connect
// JSON and binary gRPC-Web, a unary call with metadata both ways, a
// server stream, an error's code and message. A gateway without CORS is
// refused by the browser.
func TestBrowserConnectES(t *testing.T) {
	exe := chromiumPath(t)
	esbuild := webTool(t, "esbuild")
	dir := t.TempDir()
	bundle := exec.Command(esbuild, "client.js", "--bundle", "--format=iife", "--log-level=warning", "--outfile="+filepath.Join(dir, "app.js"))
	bundle.Dir = webDir
	if out, err := bundle.CombinedOutput(); err != nil {
		t.Fatalf("esbuild: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "index.html"), []byte(`<!doctype html><title>fleet connect-es</title><script src="app.js"></script>`), 0o644); err != nil {
		t.Fatal(err)
	}
	page := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer page.Close()
	open := startEcho(t, gateway.WithCORS(gateway.CORS{
		AllowedOrigins: []string{page.URL},
		AllowedHeaders: []string{"X-K"},
		ExposedHeaders: []string{"Echo"},
	}))
	closed := startEcho(t)

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
	if err := chromedp.Do(bctx, chromedp.Navigate(page.URL+"/index.html?gateway="+open+"&closed="+closed)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		done, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`window.done === true`))
		if err != nil {
			t.Fatal(err)
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the page did not finish")
		}
		time.Sleep(100 * time.Millisecond)
	}
	raw, err := chromedp.Run(bctx, chromedp.Evaluate[string](`window.result`))
	if err != nil {
		t.Fatal(err)
	}
	type calls struct{ Upper, Echo, Count, Error string }
	var res struct {
		Connect *calls
		GRPCWeb *calls `json:"grpcweb"`
		Failure string
		Closed  string
	}
	if err := json.Unmarshal([]byte(raw), &res); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	if res.Failure != "" || res.Connect == nil || res.GRPCWeb == nil {
		t.Fatalf("page: %s", raw)
	}
	// Code 3 is invalid_argument in connect-es's Code enum.
	want := calls{Upper: "HELLO", Echo: "v", Count: "0,1,2", Error: "3:fail as asked"}
	for name, got := range map[string]*calls{"Connect": res.Connect, "gRPC-Web": res.GRPCWeb} {
		if *got != want {
			t.Errorf("%s: got %+v, want %+v", name, *got, want)
		}
	}
	if res.Closed != "refused" {
		t.Errorf("a gateway without CORS: %s", res.Closed)
	}
}

// TestBufCurl calls the gateway with buf curl (npm @bufbuild/buf) over
// Connect and gRPC-Web, with the schema from testdata/web/echo.proto.
func TestBufCurl(t *testing.T) {
	buf := webTool(t, "buf")
	url := startEcho(t)
	for _, c := range []struct{ protocol, method, data, want string }{
		{"connect", "Upper", `"abc"`, `"ABC"`},
		{"grpcweb", "Upper", `"abc"`, `"ABC"`},
		{"connect", "Count", `2`, "\"0\"\n\"1\""},
		{"grpcweb", "Count", `2`, "\"0\"\n\"1\""},
	} {
		cmd := exec.Command(buf, "curl", "--schema", "echo.proto", "--protocol", c.protocol, "--data", c.data, url+"/fleet.test.Echo/"+c.method)
		cmd.Dir = webDir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("buf curl --protocol %s %s: %v\n%s", c.protocol, c.method, err, out)
		}
		if got := strings.TrimSpace(string(out)); got != c.want {
			t.Errorf("buf curl --protocol %s %s: %q, want %q", c.protocol, c.method, got, c.want)
		}
	}
	// An error: buf curl prints the code and message and exits non-zero.
	cmd := exec.Command(buf, "curl", "--schema", "echo.proto", "--protocol", "connect", "--data", `"fail"`, url+"/fleet.test.Echo/Upper")
	cmd.Dir = webDir
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "invalid_argument") || !strings.Contains(string(out), "fail as asked") {
		t.Fatalf("buf curl error: %v\n%s", err, out)
	}
}

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
