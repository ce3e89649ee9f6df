package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"testing"
)

// TestDemoJSON runs the governance demo small: an in-process etcd, three
// servers, one killed a third of the way through; no call may fail and
// the JSON carries the documented keys.
func TestDemoJSON(t *testing.T) {
	var out bytes.Buffer
	err := runDemo(context.Background(), demoFlags{calls: 3000, callers: 50, json: true, selector: "weighted", failMode: "failover"}, &out, io.Discard)
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	var res struct {
		Calls          *int64             `json:"calls"`
		Errors         *int64             `json:"errors"`
		CallsPerSecond *float64           `json:"calls_per_second"`
		Latency        map[string]float64 `json:"latency_ms"`
		PerServer      map[string]int64   `json:"per_server"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out.String())
	}
	if res.Calls == nil || *res.Calls != 3000 || res.Errors == nil || *res.Errors != 0 || res.CallsPerSecond == nil || *res.CallsPerSecond <= 0 {
		t.Fatalf("bad figures: %s", out.String())
	}
	for _, k := range []string{"mean", "p50", "p99", "max"} {
		if _, ok := res.Latency[k]; !ok {
			t.Fatalf("latency_ms lacks %q: %s", k, out.String())
		}
	}
	if len(res.PerServer) != 3 {
		t.Fatalf("per_server = %v, want 3 servers", res.PerServer)
	}
	var sum int64
	for _, n := range res.PerServer {
		sum += n
	}
	if sum < 3000 {
		t.Fatalf("servers served %d calls, fewer than the %d made", sum, 3000)
	}
}

func TestDemoRejectsBadFlags(t *testing.T) {
	for _, f := range []demoFlags{
		{calls: 10, callers: 1, selector: "nope", failMode: "failover"},
		{calls: 10, callers: 1, selector: "random", failMode: "nope"},
		{calls: 10, callers: 1, selector: "random", failMode: "failover", registry: "bogus://x:1"},
	} {
		if err := runDemo(context.Background(), f, io.Discard, io.Discard); err == nil {
			t.Errorf("flags %+v accepted", f)
		}
	}
}

// TestDemoExternalRegistries runs the demo against the ZooKeeper, Redis
// and NATS servers that .ci/services.sh starts.
func TestDemoExternalRegistries(t *testing.T) {
	for _, url := range []string{"zookeeper://127.0.0.1:2181", "redis://127.0.0.1:6379", "nats://127.0.0.1:4222"} {
		t.Run(url, func(t *testing.T) {
			var out bytes.Buffer
			f := demoFlags{calls: 2000, callers: 20, json: true, selector: "p2c", failMode: "failover", registry: url}
			if err := runDemo(context.Background(), f, &out, io.Discard); err != nil {
				t.Fatalf("demo: %v\n%s", err, out.String())
			}
			var res struct {
				Errors    int64            `json:"errors"`
				PerServer map[string]int64 `json:"per_server"`
			}
			if err := json.Unmarshal(out.Bytes(), &res); err != nil || res.Errors != 0 || len(res.PerServer) != 3 {
				t.Fatalf("result %s (%v)", out.String(), err)
			}
		})
	}
}

// TestDemoNetworks runs the demo small over KCP and QUIC: servers listen
// and register over the network, the client dials what the registry
// entries name, and one server is killed a third of the way through; no
// call may fail.
func TestDemoNetworks(t *testing.T) {
	for _, network := range []string{"kcp", "quic"} {
		t.Run(network, func(t *testing.T) {
			var out bytes.Buffer
			err := runDemo(context.Background(), demoFlags{calls: 2000, callers: 20, json: true, selector: "weighted", failMode: "failover", network: network}, &out, io.Discard)
			if err != nil {
				t.Fatalf("demo over %s: %v\n%s", network, err, out.String())
			}
			var res struct {
				Calls, Errors int64
				PerServer     map[string]int64 `json:"per_server"`
			}
			if err := json.Unmarshal(out.Bytes(), &res); err != nil {
				t.Fatalf("output is not JSON: %v\n%s", err, out.String())
			}
			if res.Calls != 2000 || res.Errors != 0 || len(res.PerServer) != 3 {
				t.Fatalf("bad figures over %s: %s", network, out.String())
			}
		})
	}
	if err := runDemo(context.Background(), demoFlags{calls: 10, callers: 1, selector: "random", failMode: "failover", network: "pigeon"}, io.Discard, io.Discard); err == nil {
		t.Fatal("--network pigeon accepted")
	}
}
