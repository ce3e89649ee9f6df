package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetrpc/fleet/registry"
)

// TestDemoServeRefusesBrowsers attacks fleet demo --serve and fleet
// dashboard as a web page in the operator's browser would: cross-site
// requests to fleet.Admin on a server's native port (HTTP/JSON and
// JSON-RPC), the same with a JSON content type but without the admin
// token, and DNS rebinding on the dashboard. Every one is refused (403,
// 415 or 401) and no registry record changes; then fleet call, reading
// the token from the file demo --serve writes, steers.
func TestDemoServeRefusesBrowsers(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv(tokenEnv, "")
	pg, err := startPlayground(context.Background(), demoFlags{selector: "weighted", failMode: "failover",
		srv: serveFlags{serve: true, addr: "127.0.0.1:0", adminAddr: "127.0.0.1:0"}})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.stop()
	remove, err := writeTokenFile(demoTokenPath(), pg.token)
	if err != nil {
		t.Fatal(err)
	}
	defer remove()

	d := newTestDashboard(t, &dashboardFlags{registry: pg.b.url})
	hs := httptest.NewServer(d.handler())
	defer hs.Close()
	records := func() []registry.Instance {
		list, err := d.targets["Arith"].disc.Instances(context.Background(), "Arith")
		if err != nil {
			t.Fatal(err)
		}
		return list
	}
	for end := time.Now().Add(20 * time.Second); len(records()) < 3; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("3 Arith instances not registered within 20 s")
		}
	}
	before := records()
	addr := pg.addrs[0]
	_, port, _ := strings.Cut(strings.TrimPrefix(hs.URL, "http://"), ":")
	steer := `{"service":"Arith","state":"draining"}`
	rpc := `{"jsonrpc":"2.0","id":1,"method":"fleet.Admin.Steer","params":{"service":"Arith","weight":9}}`
	page := map[string]string{"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}
	for _, c := range []struct {
		name, url, body string
		hdr             map[string]string
		want            int
	}{
		{"native port, text/plain", "http://" + addr + "/fleet.Admin/Steer", steer, merge(page, "Content-Type", "text/plain"), 415},
		{"native port, form", "http://" + addr + "/fleet.Admin/Steer", steer, merge(page, "Content-Type", "application/x-www-form-urlencoded"), 415},
		{"native port, JSON-RPC text/plain", "http://" + addr + "/", rpc, merge(page, "Content-Type", "text/plain"), 415},
		{"native port, cross-site JSON", "http://" + addr + "/fleet.Admin/Steer", steer, merge(page, "Content-Type", "application/json"), 403},
		{"native port, JSON without token", "http://" + addr + "/fleet.Admin/Steer", steer, map[string]string{"Content-Type": "application/json"}, 401},
		{"dashboard, rebinding", hs.URL + "/api/steer", `{"service":"Arith","addr":"` + addr + `","state":"draining"}`,
			map[string]string{"Host": "evil.example:" + port, "Origin": "http://evil.example:" + port, "Sec-Fetch-Site": "same-origin", "Content-Type": "application/json"}, 403},
		{"dashboard, rebinding GET", hs.URL + "/api/services", "", map[string]string{"Host": "evil.example:" + port}, 403},
	} {
		t.Run(c.name, func(t *testing.T) {
			method := http.MethodPost
			if c.body == "" {
				method = http.MethodGet
			}
			req, _ := http.NewRequest(method, c.url, strings.NewReader(c.body))
			for k, v := range c.hdr {
				if k == "Host" {
					req.Host = v
				} else {
					req.Header.Set(k, v)
				}
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Errorf("status %d, want %d: %s", resp.StatusCode, c.want, b)
			}
		})
	}
	// JSON-RPC with JSON but no token: refused by the auth function.
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/", strings.NewReader(rpc))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"error"`) {
		t.Errorf("JSON-RPC fleet.Admin.Steer without token: %s", b)
	}
	time.Sleep(200 * time.Millisecond) // a change would be written at once
	after := records()
	for i := range before {
		if before[i].State != after[i].State || before[i].Weight != after[i].Weight {
			t.Errorf("registry record changed: %+v -> %+v", before[i], after[i])
		}
	}

	// The operator's own tools read the token file.
	if _, err := os.Stat(filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "fleet", "demo-token")); err != nil {
		t.Fatal(err)
	}
	out, errOut, status := run(t, "", newCallCmd, addr, "fleet.Admin.Published", "{}")
	if status != 0 || !strings.Contains(out, `"instances"`) {
		t.Fatalf("fleet call fleet.Admin.Published with the token file: %d %s %s", status, out, errOut)
	}
	body := `{"service":"Arith","addr":"` + addr + `","weight":9}`
	sreq, _ := http.NewRequest(http.MethodPost, hs.URL+"/api/steer", strings.NewReader(body))
	sreq.Header.Set("Content-Type", "application/json")
	sresp, err := http.DefaultClient.Do(sreq)
	if err != nil {
		t.Fatal(err)
	}
	sb, _ := io.ReadAll(sresp.Body)
	sresp.Body.Close()
	if sresp.StatusCode != 200 {
		t.Fatalf("same-origin steer through the dashboard: %d %s", sresp.StatusCode, sb)
	}
}

func merge(m map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for a, b := range m {
		out[a] = b
	}
	return out
}
