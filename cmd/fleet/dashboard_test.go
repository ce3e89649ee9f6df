package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetrpc/fleet/internal/demo"
	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/registry/etcd"
	"github.com/fleetrpc/fleet/registry/etcd/embedded"
	"github.com/fleetrpc/fleet/server"
)

// demoFleet is an in-process etcd with three servers of Arith and Hello
// published into it with weights 1, 2 and 3.
type demoFleet struct {
	registryURL string
	addrs       []string
	servers     []*server.Server // in the order of addrs
	disc        registry.Discovery
}

func startDemoFleet(t *testing.T) *demoFleet {
	t.Helper()
	es, err := embedded.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(es.Close)
	cfg := etcd.Config{Endpoints: []string{es.Addr()}, TTL: 10 * time.Second, Logger: quietLogger()}
	f := &demoFleet{registryURL: "etcd://" + es.Addr()}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for w := 1; w <= 3; w++ {
		srv := server.New(server.WithLogger(quietLogger()))
		if err := registerBuiltins(srv, true); err != nil {
			t.Fatal(err)
		}
		if err := srv.Register(demo.Arith{}); err != nil {
			t.Fatal(err)
		}
		if err := srv.Register(&demo.Hello{}); err != nil {
			t.Fatal(err)
		}
		reg, err := etcd.NewRegistrar(cfg)
		if err != nil {
			t.Fatal(err)
		}
		addr := serveNoCleanup(t, srv)
		// Cleanups run last-in first-out: shut the server down (which
		// deregisters), then close its registrar, before etcd stops.
		t.Cleanup(func() { reg.Close() })
		t.Cleanup(func() {
			sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer scancel()
			srv.Shutdown(sctx)
		})
		for _, svc := range []string{"Arith", "Hello"} {
			in := registry.Instance{Service: svc, Addr: addr, Weight: w, Group: "demo", Version: "1"}
			if err := srv.Publish(ctx, reg, in, server.PublishConfig{LoadInterval: 500 * time.Millisecond, DrainDelay: time.Millisecond}); err != nil {
				t.Fatal(err)
			}
		}
		f.addrs = append(f.addrs, addr)
		f.servers = append(f.servers, srv)
	}
	f.disc, err = etcd.NewDiscovery(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.disc.Close() })
	return f
}

// serveNoCleanup serves srv on loopback; the caller shuts it down.
func serveNoCleanup(t *testing.T, srv *server.Server) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	return lis.Addr().String()
}

func newTestDashboard(t *testing.T, f *dashboardFlags) *dashboard {
	t.Helper()
	if f.services == nil {
		f.services = []string{"Arith", "Hello"}
	}
	if f.listen == "" {
		f.listen = "127.0.0.1:0"
	}
	if f.timeout == 0 {
		f.timeout = 10 * time.Second
	}
	d, err := newDashboard(f)
	if err != nil {
		t.Fatal(err)
	}
	d.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	t.Cleanup(d.close)
	return d
}

func getJSON(t *testing.T, c *http.Client, url string, v any) int {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if v != nil {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
	}
	return resp.StatusCode
}

func postCall(t *testing.T, url, contentType, body string, hdr map[string]string) (int, apiCallResponse) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/api/call", strings.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out apiCallResponse
	b, _ := io.ReadAll(resp.Body)
	json.Unmarshal(b, &out)
	return resp.StatusCode, out
}

// waitInstances polls /api/services until every service lists n
// instances (bounded by 20 s) and returns the last answer.
func waitInstances(t *testing.T, url string, n int) apiServices {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var s apiServices
		getJSON(t, http.DefaultClient, url+"/api/services", &s)
		ok := len(s.Services) > 0
		for _, svc := range s.Services {
			ok = ok && len(svc.Instances) == n
		}
		if ok {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("instances never reached %d: %+v", n, s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestDashboardAPI(t *testing.T) {
	f := startDemoFleet(t)
	d := newTestDashboard(t, &dashboardFlags{registry: f.registryURL})
	hs := httptest.NewServer(d.handler())
	defer hs.Close()

	s := waitInstances(t, hs.URL, 3)
	if s.Registry != f.registryURL || s.Services[0].Name != "Arith" || s.Services[1].Name != "Hello" {
		t.Fatalf("services %+v", s)
	}
	var weights []int
	for _, in := range s.Services[0].Instances {
		weights = append(weights, in.Weight)
		if in.Group != "demo" || in.Version != "1" || in.State != "active" || !slices.Contains(f.addrs, in.Addr) {
			t.Fatalf("instance %+v", in)
		}
	}
	slices.Sort(weights)
	if !slices.Equal(weights, []int{1, 2, 3}) {
		t.Fatalf("weights %v", weights)
	}

	var m struct{ Methods []string }
	if code := getJSON(t, http.DefaultClient, hs.URL+"/api/methods?service=Arith", &m); code != 200 || !slices.Equal(m.Methods, []string{"Add", "Div", "Mul"}) {
		t.Fatalf("methods: %d %v", code, m.Methods)
	}
	if code := getJSON(t, http.DefaultClient, hs.URL+"/api/methods?service=Nope", nil); code != http.StatusNotFound {
		t.Fatalf("methods of an unknown service: %d", code)
	}

	for _, tc := range []struct {
		name, ctype, body string
		hdr               map[string]string
		status            int
		code              string
		reply, message    string
	}{
		{"add", "application/json", `{"method":"Arith.Add","args":"{\"A\":1,\"B\":2}"}`, nil, 200, "ok", "3", ""},
		{"protobuf", "application/json", `{"method":"Hello.Say","args":"{\"field1\":\"x\",\"field2\":1,\"field3\":5}"}`, nil, 200, "ok", `"field3":5`, ""},
		{"handler error", "application/json", `{"method":"Arith.Div","args":"{\"A\":1,\"B\":0}"}`, nil, 502, "unknown", "", "divide by zero"},
		{"unknown method", "application/json", `{"method":"Arith.Nope","args":"{}"}`, nil, 502, "not_found", "", `unknown method "Nope"`},
		{"malformed args", "application/json", `{"method":"Arith.Add","args":"{\"A\":"}`, nil, 400, "", "", "not valid JSON"},
		{"malformed body", "application/json", `{"method":`, nil, 400, "", "", "request body"},
		{"service not shown", "application/json", `{"method":"Other.Do","args":"{}"}`, nil, 400, "", "", "not shown here"},
		{"not JSON", "text/plain", `{"method":"Arith.Add"}`, nil, http.StatusUnsupportedMediaType, "", "", ""},
		{"cross-site", "application/json", `{"method":"Arith.Add","args":"{}"}`, map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden, "", "", ""},
		{"other origin", "application/json", `{"method":"Arith.Add","args":"{}"}`, map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden, "", "", ""},
	} {
		status, out := postCall(t, hs.URL, tc.ctype, tc.body, tc.hdr)
		if status != tc.status || (tc.code != "" && out.Code != tc.code) || !strings.Contains(string(out.Reply), tc.reply) || !strings.Contains(out.Message, tc.message) {
			t.Errorf("%s: status %d, %+v (reply %s)", tc.name, status, out, out.Reply)
		}
	}

	// Steering: a weight and a state change reach the registry through
	// the instance's fleet.Admin.
	victim := f.addrs[0]
	for _, tc := range []struct {
		body   string
		status int
		want   func(apiInstance) bool
	}{
		{`{"service":"Arith","addr":"` + victim + `","weight":7}`, 200, func(in apiInstance) bool { return in.Weight == 7 && in.State == "active" }},
		{`{"service":"Arith","addr":"` + victim + `","state":"draining"}`, 200, func(in apiInstance) bool { return in.Weight == 7 && in.State == "draining" }},
		{`{"service":"Arith","addr":"` + victim + `","state":"active"}`, 200, func(in apiInstance) bool { return in.State == "active" }},
		{`{"service":"Arith","addr":"` + victim + `","state":"gone"}`, 502, nil},
		{`{"service":"Arith","addr":"127.0.0.1:1","weight":2}`, 400, nil},
		{`{"service":"Nope","addr":"` + victim + `","weight":2}`, 400, nil},
		{`{"service":`, 400, nil},
	} {
		req, _ := http.NewRequest(http.MethodPost, hs.URL+"/api/steer", strings.NewReader(tc.body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Fatalf("steer %s: %d %s", tc.body, resp.StatusCode, b)
		}
		if tc.want == nil {
			continue
		}
		deadline := time.Now().Add(15 * time.Second)
		for {
			var s apiServices
			getJSON(t, http.DefaultClient, hs.URL+"/api/services", &s)
			i := slices.IndexFunc(s.Services[0].Instances, func(in apiInstance) bool { return in.Addr == victim })
			if i >= 0 && tc.want(s.Services[0].Instances[i]) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after steer %s the registry shows %+v", tc.body, s.Services[0].Instances)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	// The page and its assets are served from the binary.
	for _, p := range []string{"/", "/app.js", "/style.css", "/favicon.svg", "/favicon.ico"} {
		resp, err := http.Get(hs.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'self'") {
			t.Fatalf("GET %s: %d %v", p, resp.StatusCode, resp.Header)
		}
	}
}

func TestDashboardSafety(t *testing.T) {
	if _, err := newDashboard(&dashboardFlags{registry: "static://127.0.0.1:1", services: []string{"A"}, listen: "0.0.0.0:8090"}); exitStatus(err) != exitUsage || !strings.Contains(err.Error(), "--token") {
		t.Fatalf("non-loopback without token: %v", err)
	}
	for _, ok := range []string{"127.0.0.1:0", "localhost:8090", "[::1]:8090"} {
		if !loopbackAddr(ok) {
			t.Errorf("%s not loopback", ok)
		}
	}
	for _, bad := range []string{":8090", "0.0.0.0:1", "10.0.0.1:1", "example.com:1", "nonsense"} {
		if loopbackAddr(bad) {
			t.Errorf("%s loopback", bad)
		}
	}
	if _, err := newDashboard(&dashboardFlags{services: []string{"A"}, listen: "127.0.0.1:0"}); exitStatus(err) != exitUsage {
		t.Fatalf("no registry: %v", err)
	}

	srv := server.New(server.WithLogger(quietLogger()))
	if err := registerBuiltins(srv, false); err != nil {
		t.Fatal(err)
	}
	srv.Register(demo.Arith{})
	addr := serveNoCleanup(t, srv)
	defer srv.Close()
	d := newTestDashboard(t, &dashboardFlags{registry: "static://" + addr, services: []string{"Arith"}, listen: "0.0.0.0:0", connFlags: connFlags{token: "t0k"}})
	hs := httptest.NewServer(d.handler())
	defer hs.Close()
	if code := getJSON(t, http.DefaultClient, hs.URL+"/api/services", nil); code != http.StatusUnauthorized {
		t.Fatalf("no token: %d", code)
	}
	status, _ := postCall(t, hs.URL, "application/json", `{"method":"Arith.Add","args":"{}"}`, map[string]string{"Authorization": "Bearer wrong"})
	if status != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", status)
	}
	status, out := postCall(t, hs.URL, "application/json", `{"method":"Arith.Add","args":"{\"A\":2,\"B\":2}"}`, map[string]string{"Authorization": "Bearer t0k"})
	if status != 200 || string(out.Reply) != "4" {
		t.Fatalf("bearer token: %d %+v", status, out)
	}
	// Steering a server without fleet.Admin: a clear error.
	req, _ := http.NewRequest(http.MethodPost, hs.URL+"/api/steer", strings.NewReader(`{"service":"Arith","addr":"`+addr+`","weight":2}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer t0k")
	sresp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sb, _ := io.ReadAll(sresp.Body)
	sresp.Body.Close()
	if sresp.StatusCode != http.StatusBadGateway || !strings.Contains(string(sb), "admin.Register") || !strings.Contains(string(sb), "unimplemented") {
		t.Fatalf("steer without admin: %d %s", sresp.StatusCode, sb)
	}

	// /?token= sets an HttpOnly SameSite=Strict cookie the page then uses.
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(hs.URL + "/?token=t0k")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cookies := resp.Cookies()
	if resp.StatusCode != http.StatusSeeOther || len(cookies) != 1 || !cookies[0].HttpOnly || cookies[0].SameSite != http.SameSiteStrictMode {
		t.Fatalf("token link: %d %v", resp.StatusCode, cookies)
	}
	req, _ = http.NewRequest(http.MethodGet, hs.URL+"/api/services", nil)
	req.AddCookie(cookies[0])
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("cookie: %d", resp.StatusCode)
	}

	// A registry that is down: the page gets the error, nothing crashes.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := lis.Addr().String()
	lis.Close()
	dd := newTestDashboard(t, &dashboardFlags{registry: "etcd://" + down, services: []string{"Arith"}, connFlags: connFlags{timeout: 2 * time.Second}})
	hd := httptest.NewServer(dd.handler())
	defer hd.Close()
	var s apiServices
	if code := getJSON(t, http.DefaultClient, hd.URL+"/api/services", &s); code != 200 || len(s.Services) != 1 || !strings.Contains(s.Services[0].Error, "registry") {
		t.Fatalf("registry down: %d %+v", code, s)
	}
	status, out = postCall(t, hd.URL, "application/json", `{"method":"Arith.Add","args":"{}"}`, nil)
	if status != http.StatusBadGateway || out.Code != "unavailable" {
		t.Fatalf("call with the registry down: %d %+v", status, out)
	}
}
