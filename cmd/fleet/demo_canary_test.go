package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"testing"
)

// TestDemoCanary runs `fleet demo --canary --fault` with 10,000 calls per
// step on an in-process etcd: at each step v2's share is within ±2 points
// of the share set, no call fails, the injected aborts were retried, and
// fleet_policy_version reports the step's version; the last step's
// invalid policy is refused and the metric still reports the last good
// one, whose split the calls keep following.
func TestDemoCanary(t *testing.T) {
	var out bytes.Buffer
	f := demoFlags{calls: 50000, callers: 32, json: true, selector: "random", failMode: "failover", network: "tcp", canary: true, fault: true}
	if err := runCanary(context.Background(), f, &out, io.Discard); err != nil {
		t.Fatalf("demo --canary: %v\n%s", err, out.String())
	}
	var steps []canaryStep
	if err := json.Unmarshal(out.Bytes(), &steps); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out.String())
	}
	if len(steps) != len(canaryShares)+1 {
		t.Fatalf("%d steps, want %d", len(steps), len(canaryShares)+1)
	}
	for i, st := range steps {
		if i == len(canaryShares) {
			last := steps[i-1]
			if st.Version != canaryBad || st.Refused == "" || st.InForce != last.Version || st.Set != last.Set {
				t.Fatalf("bad policy step: %+v, want refused with %s in force", st, last.Version)
			}
		} else if st.Set != canaryShares[i] || st.Refused != "" || st.InForce != st.Version {
			t.Fatalf("step %d: %+v", i, st)
		}
		if st.Calls != 10000 || st.Errors != 0 {
			t.Fatalf("step %d: %+v", i, st)
		}
		if math.Abs(st.V2Share-float64(st.Set)) > 2 {
			t.Fatalf("step %d: v2 set %d%%, observed %.2f%%", i, st.Set, st.V2Share)
		}
		// 10% of about 10,000 attempts are aborted and retried.
		if st.Retries < 800 || st.Retries > 1300 {
			t.Fatalf("step %d: %d retries, want about 1,100", i, st.Retries)
		}
	}
}
