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
// of the share set, no call fails, and the injected aborts were retried.
func TestDemoCanary(t *testing.T) {
	var out bytes.Buffer
	f := demoFlags{calls: 40000, callers: 32, json: true, selector: "random", failMode: "failover", network: "tcp", canary: true, fault: true}
	if err := runCanary(context.Background(), f, &out, io.Discard); err != nil {
		t.Fatalf("demo --canary: %v\n%s", err, out.String())
	}
	var steps []canaryStep
	if err := json.Unmarshal(out.Bytes(), &steps); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out.String())
	}
	if len(steps) != len(canaryShares) {
		t.Fatalf("%d steps, want %d", len(steps), len(canaryShares))
	}
	for i, st := range steps {
		if st.Set != canaryShares[i] || st.Calls != 10000 || st.Errors != 0 {
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
