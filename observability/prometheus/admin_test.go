package fleetprom_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fleetrpc/fleet/client"
	fleetprom "github.com/fleetrpc/fleet/observability/prometheus"
	"github.com/fleetrpc/fleet/server"
	"github.com/prometheus/client_golang/prometheus"
)

func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestAdmin: /metrics serves the registry, /healthz and /readyz report the
// servers and turn 503 once a server's Shutdown begins, the token is
// enforced, and a non-loopback address without a token is refused.
func TestAdmin(t *testing.T) {
	reg := prometheus.NewRegistry()
	sm := fleetprom.NewServerMetrics()
	reg.MustRegister(sm)
	srv := server.New(sm.Option())
	addr := serve(t, srv)
	c, err := client.Dial(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var sum int
	if err := c.Call(context.Background(), "Arith", "Add", &Args{A: 1, B: 2}, &sum); err != nil {
		t.Fatal(err)
	}

	if _, err := fleetprom.ListenAdmin("0.0.0.0:0", fleetprom.AdminConfig{}); err == nil {
		t.Fatal("ListenAdmin on 0.0.0.0 without a token succeeded")
	}
	const token = "s3cret"
	adm, err := fleetprom.ListenAdmin("127.0.0.1:0", fleetprom.AdminConfig{
		Gatherer: reg, Servers: map[string]*server.Server{"a": srv}, Pprof: true, Token: token,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	base := "http://" + adm.Addr().String()

	if code, _ := get(t, base+"/metrics", ""); code != http.StatusUnauthorized {
		t.Errorf("/metrics without token: %d", code)
	}
	code, body := get(t, base+"/metrics", token)
	if code != 200 || !strings.Contains(body, `fleet_server_handled_total{code="ok",method="Add",route="native",service="Arith",type="unary"} 1`) {
		t.Errorf("/metrics: %d\n%s", code, body)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, body := get(t, base+p, token); code != 200 || body != "a SERVING\n" {
			t.Errorf("%s: %d %q", p, code, body)
		}
	}
	if code, _ := get(t, base+"/debug/pprof/", token); code != 200 {
		t.Errorf("/debug/pprof/: %d", code)
	}

	checked := make(chan struct{})
	srv.OnShutdown(func(context.Context) {
		defer close(checked)
		for _, p := range []string{"/healthz", "/readyz"} {
			if code, body := get(t, base+p, token); code != http.StatusServiceUnavailable || body != "a NOT_SERVING\n" {
				t.Errorf("%s during shutdown: %d %q", p, code, body)
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	<-checked
}

// TestAdminBrowserRequests: the admin endpoint refuses, with 403, what a
// web page can send it (cross-site fetches, DNS rebinding through a
// foreign Host) on every path, pprof and the command line included; pprof
// is off unless enabled; a slow request is cut by the read timeout.
func TestAdminBrowserRequests(t *testing.T) {
	srv := server.New()
	adm, err := fleetprom.ListenAdmin("127.0.0.1:0", fleetprom.AdminConfig{
		Gatherer: prometheus.NewRegistry(), Servers: map[string]*server.Server{"a": srv}, Pprof: true, Hosts: []string{"admin.internal"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	addr := adm.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	do := func(path string, hdr map[string]string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		for k, v := range hdr {
			if k == "Host" {
				req.Host = v
				continue
			}
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, path := range []string{"/metrics", "/healthz", "/debug/pprof/", "/debug/pprof/cmdline"} {
		for _, c := range []struct {
			name string
			hdr  map[string]string
			want int
		}{
			{"plain", nil, 200},
			{"localhost", map[string]string{"Host": "localhost:" + port}, 200},
			{"configured name", map[string]string{"Host": "Admin.Internal:" + port}, 200},
			{"rebinding", map[string]string{"Host": "evil.example:" + port}, 403},
			{"rebinding same-origin", map[string]string{"Host": "evil.example:" + port, "Origin": "http://evil.example:" + port, "Sec-Fetch-Site": "same-origin"}, 403},
			{"cross-site", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403},
			{"same-site", map[string]string{"Sec-Fetch-Site": "same-site"}, 403},
			{"origin", map[string]string{"Origin": "http://evil.example"}, 403},
		} {
			if got := do(path, c.hdr); got != c.want {
				t.Errorf("%s %s: %d, want %d", path, c.name, got, c.want)
			}
		}
	}

	off, err := fleetprom.ListenAdmin("127.0.0.1:0", fleetprom.AdminConfig{Gatherer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	defer off.Close()
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/cmdline"} {
		resp, err := http.Get("http://" + off.Addr().String() + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s without Pprof: %d", path, resp.StatusCode)
		}
	}
}

// TestAdminOpenAPI: /openapi.json serves what AdminConfig.OpenAPI returns,
// as JSON and behind the token; a failure is a 500 with its text; without
// OpenAPI the path is 404.
func TestAdminOpenAPI(t *testing.T) {
	const token = "s3cret"
	fail := false
	adm, err := fleetprom.ListenAdmin("127.0.0.1:0", fleetprom.AdminConfig{
		Gatherer: prometheus.NewRegistry(), Token: token,
		OpenAPI: func() ([]byte, error) {
			if fail {
				return nil, errors.New("no document")
			}
			return []byte(`{"openapi":"3.1.0"}`), nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	base := "http://" + adm.Addr().String()
	if code, _ := get(t, base+"/openapi.json", ""); code != http.StatusUnauthorized {
		t.Errorf("without token: %d", code)
	}
	if code, body := get(t, base+"/openapi.json", token); code != 200 || body != `{"openapi":"3.1.0"}` {
		t.Errorf("/openapi.json: %d %q", code, body)
	}
	fail = true
	if code, body := get(t, base+"/openapi.json", token); code != 500 || !strings.Contains(body, "no document") {
		t.Errorf("failing OpenAPI: %d %q", code, body)
	}

	plain, err := fleetprom.ListenAdmin("127.0.0.1:0", fleetprom.AdminConfig{Gatherer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if code, _ := get(t, "http://"+plain.Addr().String()+"/openapi.json", ""); code != http.StatusNotFound {
		t.Errorf("without OpenAPI: %d", code)
	}
}
