package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/registry/etcd"
)

// TestDashboardDiscovery: without --service the dashboard shows the
// services the registry lists, each server once with the services it
// serves, and keeps a history of their load; a service that appears
// later is shown and callable, one that leaves is dropped.
func TestDashboardDiscovery(t *testing.T) {
	f := startDemoFleet(t)
	d := newTestDashboard(t, &dashboardFlags{registry: f.registryURL, services: []string{}})
	hs := httptest.NewServer(d.handler())
	defer hs.Close()

	s := waitInstances(t, hs.URL, 3)
	if len(s.Services) != 2 || s.Services[0].Name != "Arith" || s.Services[1].Name != "Hello" || s.Error != "" {
		t.Fatalf("services %+v", s)
	}
	if len(s.Servers) != 3 {
		t.Fatalf("servers %+v", s.Servers)
	}
	for _, sv := range s.Servers {
		if strings.Join(sv.Services, ",") != "Arith,Hello" {
			t.Fatalf("server %s serves %v", sv.Addr, sv.Services)
		}
	}
	for _, svc := range s.Services {
		if svc.State != serviceActive || svc.Active != 3 {
			t.Fatalf("service %+v", svc)
		}
	}
	// The sampler keeps a point a second per server.
	deadline := time.Now().Add(15 * time.Second)
	for len(d.hist.points(f.addrs[0])) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("no history kept")
		}
		time.Sleep(100 * time.Millisecond)
	}
	getJSON(t, http.DefaultClient, hs.URL+"/api/services", &s)
	if len(s.Servers[0].History) < 2 || s.HistorySecond != int(historyWindow/time.Second) {
		t.Fatalf("history %+v (%d s)", s.Servers[0].History, s.HistorySecond)
	}

	// A new service in the registry: listed, and the API accepts it.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reg := newEtcdRegistrar(t, f)
	extra := registry.Instance{Service: "Extra", Addr: f.addrs[0]}
	if err := reg.Register(ctx, extra); err != nil {
		t.Fatal(err)
	}
	if status, out := postCall(t, hs.URL, "application/json", `{"method":"Extra.Do","args":"{}"}`, nil); status != http.StatusBadGateway || out.Code != "not_found" {
		t.Fatalf("call of a listed service the server lacks: %d %+v", status, out)
	}
	getJSON(t, http.DefaultClient, hs.URL+"/api/services", &s)
	if len(s.Services) != 3 || s.Services[1].Name != "Extra" {
		t.Fatalf("after Register: %+v", s.Services)
	}
	if err := reg.Deregister(ctx, extra); err != nil {
		t.Fatal(err)
	}
	getJSON(t, http.DefaultClient, hs.URL+"/api/services", &s)
	if len(s.Services) != 2 {
		t.Fatalf("after Deregister: %+v", s.Services)
	}
	if status, out := postCall(t, hs.URL, "application/json", `{"method":"Extra.Do","args":"{}"}`, nil); status != http.StatusBadRequest || !strings.Contains(out.Message, "not shown here") {
		t.Fatalf("call of a service no longer listed: %d %+v", status, out)
	}

	// A registry that cannot list services needs --service.
	if _, err := newDashboard(&dashboardFlags{registry: "static://127.0.0.1:1", services: nil, listen: "127.0.0.1:0"}); exitStatus(err) != exitUsage || !strings.Contains(err.Error(), "--service") {
		t.Fatalf("static registry without --service: %v", err)
	}
}

// TestDashboardDescribeAndDraining: /api/describe answers the zero-value
// template fleet describe prints (accepted as it is by /api/call), and
// with every instance of a service draining, calls and look-ups say so.
func TestDashboardDescribeAndDraining(t *testing.T) {
	f := startDemoFleet(t)
	d := newTestDashboard(t, &dashboardFlags{registry: f.registryURL})
	hs := httptest.NewServer(d.handler())
	defer hs.Close()
	waitInstances(t, hs.URL, 3)

	for _, tc := range []struct{ method, tmpl, args string }{
		{"Arith.Add", `{"A":0,"B":0}`, "demo.Args"},
		{"Hello.Say", `"field1":""`, "pb.BenchmarkMessage"},
	} {
		var rep apiDescribeReply
		if code := getJSON(t, http.DefaultClient, hs.URL+"/api/describe?method="+tc.method, &rep); code != 200 {
			t.Fatalf("describe %s: %d", tc.method, code)
		}
		compact, _ := json.Marshal(rep.Template)
		if !strings.Contains(string(compact), tc.tmpl) || !strings.Contains(rep.Args, tc.args) {
			t.Fatalf("describe %s: %+v (%s)", tc.method, rep, compact)
		}
		body, _ := json.Marshal(apiCallRequest{Method: tc.method, Args: string(rep.Template)})
		if status, out := postCall(t, hs.URL, "application/json", string(body), nil); status != 200 {
			t.Fatalf("%s with its template: %d %+v", tc.method, status, out)
		}
	}
	if code := getJSON(t, http.DefaultClient, hs.URL+"/api/describe?method=Arith.Ad", nil); code != http.StatusBadGateway {
		t.Fatalf("describe of an unknown method: %d", code)
	}

	// Every Arith instance draining.
	for _, srv := range f.servers {
		for _, pub := range srv.Publications() {
			if pub.Instance().Service != "Arith" {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := pub.Update(ctx, func(in *registry.Instance) { in.State = registry.Draining })
			cancel()
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	var s apiServices
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		getJSON(t, http.DefaultClient, hs.URL+"/api/services", &s)
		if s.Services[0].State == serviceAllDraining {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Arith: %+v", s.Services[0])
		}
	}
	if s.Services[0].Active != 0 || s.Services[1].State != serviceActive {
		t.Fatalf("services %+v", s.Services)
	}
	status, out := postCall(t, hs.URL, "application/json", `{"method":"Arith.Add","args":"{\"A\":1,\"B\":2}"}`, nil)
	if status != http.StatusBadGateway || out.Code != "unavailable" || out.Status != 78 ||
		!strings.Contains(out.Text, `fleet: registry `) || !strings.Contains(out.Message, `all 3 instances of service "Arith" are draining`) {
		t.Fatalf("call while draining: %d %+v", status, out)
	}
	var e apiCallResponse
	if code := getJSON(t, http.DefaultClient, hs.URL+"/api/methods?service=Arith", &e); code != http.StatusBadGateway || !strings.Contains(e.Message, "draining") {
		t.Fatalf("methods while draining: %d %+v", code, e)
	}
}

// newEtcdRegistrar opens a registrar on f's etcd, closed at the end of
// the test.
func newEtcdRegistrar(t *testing.T, f *demoFleet) registry.Registrar {
	t.Helper()
	r, err := etcd.NewRegistrar(etcd.Config{Endpoints: []string{strings.TrimPrefix(f.registryURL, "etcd://")}, TTL: 10 * time.Second, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}
