package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDemoServe runs `demo --serve` in process with load: /metrics shows
// fleet_server_handled_total for Arith.Add growing across the three
// servers, /healthz answers 200, and stop shuts everything down.
func TestDemoServe(t *testing.T) {
	f := demoFlags{selector: "weighted", failMode: "failover",
		srv: serveFlags{serve: true, addr: "127.0.0.1:0", adminAddr: "127.0.0.1:0", load: 200}}
	pg, err := startPlayground(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.stop()
	base := "http://" + pg.admin.Addr().String()
	hc := &http.Client{Timeout: 5 * time.Second}
	get := func(path string) (int, string) {
		resp, err := hc.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	re := regexp.MustCompile(`(?m)^fleet_server_handled_total\{code="ok",instance="[^"]+",method="Add",route="native",service="Arith",type="unary"\} (\S+)$`)
	handled := func() float64 {
		_, body := get("/metrics")
		var sum float64
		for _, m := range re.FindAllStringSubmatch(body, -1) {
			v, _ := strconv.ParseFloat(m[1], 64)
			sum += v
		}
		return sum
	}
	deadline := time.Now().Add(20 * time.Second)
	first := -1.0
	for {
		n := handled()
		if first < 0 && n > 0 {
			first = n
		}
		if first > 0 && n > first {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fleet_server_handled_total for Arith.Add did not grow within 20 s (first %v, now %v)", first, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code, body := get("/healthz"); code != 200 {
		t.Fatalf("/healthz: %d %q", code, body)
	}
	// The admin endpoint serves the OpenAPI document of the first
	// server's HTTP/JSON routes (fleet.Admin among them: the demo has auth).
	code, body := get("/openapi.json")
	if code != 200 || !strings.Contains(body, `"openapi": "3.1.0"`) || !strings.Contains(body, `"/Arith/Add"`) ||
		!strings.Contains(body, `"url": "http://`+pg.addrs[0]+`"`) {
		t.Fatalf("/openapi.json: %d\n%.300s", code, body)
	}
}

// TestDemoServeGateway: the demo's servers answer HTTP/JSON and JSON-RPC
// 2.0 on their native port.
func TestDemoServeGateway(t *testing.T) {
	f := demoFlags{selector: "weighted", failMode: "failover",
		srv: serveFlags{serve: true, addr: "127.0.0.1:0", adminAddr: "127.0.0.1:0"}}
	pg, err := startPlayground(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.stop()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 20 * time.Second}
	post := func(path, body string) string {
		t.Helper()
		resp, err := hc.Post("http://"+pg.addrs[0]+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("POST %s: %d %s", path, resp.StatusCode, b)
		}
		return string(b)
	}
	if got := post("/Arith/Add", `{"A":1,"B":2}`); got != "3" {
		t.Fatalf("HTTP/JSON Arith.Add: %s", got)
	}
	if got := post("/", `{"jsonrpc":"2.0","method":"Arith.Add","params":{"A":1,"B":2},"id":7}`); got != `{"jsonrpc":"2.0","result":3,"id":7}` {
		t.Fatalf("JSON-RPC Arith.Add: %s", got)
	}

	// gRPC, through grpcurl (installed by .ci/setup.d/60-gateway.sh).
	grpcurl := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, grpcurlBin(t), append([]string{"-plaintext"}, args...)...)
		cmd.WaitDelay = 5 * time.Second
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("grpcurl %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	out := grpcurl(pg.addrs[0], "list")
	for _, want := range []string{"Arith\n", "Hello\n"} {
		if !strings.Contains(out, want) {
			t.Fatalf("grpcurl list lacks %q:\n%s", want, out)
		}
	}
	if out := grpcurl("-max-time", "20", "-d", `{"A":1,"B":2}`, pg.addrs[0], "Arith/Add"); !strings.Contains(out, `"value": "3"`) {
		t.Fatalf("grpcurl Arith/Add:\n%s", out)
	}
}

// grpcurlBin finds grpcurl on PATH, else where `go install` puts it.
func grpcurlBin(t *testing.T) string {
	if p, err := exec.LookPath("grpcurl"); err == nil {
		return p
	}
	for _, v := range []string{"GOBIN", "GOPATH"} {
		out, err := exec.Command("go", "env", v).Output()
		d := strings.TrimSpace(string(out))
		if err != nil || d == "" {
			continue
		}
		if v == "GOPATH" {
			d = filepath.Join(filepath.SplitList(d)[0], "bin")
		}
		if _, err := os.Stat(filepath.Join(d, "grpcurl")); err == nil {
			return filepath.Join(d, "grpcurl")
		}
	}
	t.Fatal("grpcurl not found: run .ci/setup.d/60-gateway.sh (sourced by .ci/services.sh)")
	return ""
}

// TestDemoServeAddressInUse: an address in use (the registry's, a
// server's) fails startPlayground with an error naming it, and whatever
// had started is stopped.
func TestDemoServeAddressInUse(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	busy := lis.Addr().String()
	for _, f := range []demoFlags{
		{selector: "weighted", failMode: "failover", srv: serveFlags{serve: true, addr: "127.0.0.1:0", adminAddr: "127.0.0.1:0", registryAddr: busy}},
		{selector: "weighted", failMode: "failover", srv: serveFlags{serve: true, addr: busy, adminAddr: "127.0.0.1:0"}},
	} {
		pg, err := startPlayground(context.Background(), f)
		if err == nil {
			pg.stop()
			t.Fatalf("%+v: started on an address in use", f.srv)
		}
		if !strings.Contains(err.Error(), busy) {
			t.Fatalf("%+v: error %q does not name %s", f.srv, err, busy)
		}
	}
}
