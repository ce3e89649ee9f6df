package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"testing"

	"github.com/fleetrpc/fleet/policy"
)

// TestBenchGovernanceQuick runs "fleet bench governance --quick --json"
// with its etcd and client processes as children of the test binary: the
// run ends with every client converged, every write was matched to its
// application by every client watching its service, and the figures are
// there. Nothing timed is asserted.
func TestBenchGovernanceQuick(t *testing.T) {
	launch := govLaunch
	govLaunch = func(args ...string) *exec.Cmd {
		c := launch(args...)
		c.Env = append(os.Environ(), childEnv+"=1")
		return c
	}
	defer func() { govLaunch = launch }()
	out, errs, status := run(t, "", governanceCommand, "--quick", "--json")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errs)
	}
	var res []govResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(res) != 1 {
		t.Fatalf("%d results, want 1: %s", len(res), out)
	}
	r := res[0]
	if !r.Converged || r.Instances != 20 || r.Clients != 8 || r.Watch != 3 {
		t.Fatalf("result: %+v", r)
	}
	if r.Instance.Writes != 40 || r.Policy.Writes != 3 || r.Instance.Missing != 0 || r.Policy.Missing != 0 {
		t.Fatalf("writes matched: instance %+v, policy %+v", r.Instance, r.Policy)
	}
	// Each service is watched by 8*3/4 = 6 clients.
	if want := int64(6 * (40 + 3)); r.Updates < want {
		t.Fatalf("%d updates applied, want at least %d", r.Updates, want)
	}
	if r.HeapPerKnown <= 0 || r.CPUPerUpdate <= 0 || r.WritesPerSec <= 0 || r.SentBytes <= 0 {
		t.Fatalf("figures missing: %+v", r)
	}
}

// The policy documents the benchmark writes are valid.
func TestGovPolicyValid(t *testing.T) {
	for _, v := range []int64{0, 7, 1234} {
		p, err := policy.Parse(govPolicy("svc007", v))
		if err != nil {
			t.Fatal(err)
		}
		if p.Service() != "svc007" {
			t.Fatalf("service %q", p.Service())
		}
	}
}

// govLatencies matches writes to their application: a coalesced list
// (an addition first seen with a later version) still counts for the
// addition; a removal is matched by the instance's disappearance; each
// write's all-clients time is its slowest client's.
func TestGovLatencies(t *testing.T) {
	ms := int64(1e6)
	events := []govEvent{
		{kind: 'a', svc: 0, id: 5, v: 1, at: 0},
		{kind: 'u', svc: 0, id: 5, v: 2, at: 10 * ms},
		{kind: 'r', svc: 0, id: 3, v: -1, at: 20 * ms},
		{kind: 'p', svc: 0, v: 4, at: 30 * ms},
	}
	watchers := [][]int{{0, 1}}
	inst := [][4]int64{
		{0, 5, 1, 3 * ms}, {0, 5, 2, 14 * ms}, // client 0 sees both
		{1, 5, 2, 15 * ms}, // client 1 sees the addition and update together
		{0, 3, -1, 21 * ms}, {1, 3, -1, 29 * ms},
	}
	pol := [][4]int64{{0, 0, 4, 31 * ms}} // client 1 never applies the policy
	i, p := govLatencies(events, watchers, inst, pol)
	if i.Writes != 3 || i.Missing != 0 || i.AllMax != 15 || i.AllP50 != 9 {
		t.Fatalf("instance: %+v", i)
	}
	if p.Writes != 1 || p.Missing != 1 || p.AllMax != 1 {
		t.Fatalf("policy: %+v", p)
	}
}
