package server_test

import (
	"context"
	"testing"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/server"
)

// TestAdmissionStats: AdmissionStats lists the configured stages in
// pipeline order with their limits, what is in use and what they refused,
// and agrees with the older getters (RefusedConns, AdaptiveLimitState);
// a server with default options reports the per-connection cap and the
// memory budget only.
func TestAdmissionStats(t *testing.T) {
	def := server.New().AdmissionStats()
	if len(def) != 2 || def[0].Stage != server.StageConnConcurrency || def[0].Limit != 10000 ||
		def[1].Stage != server.StageMemory || def[1].Limit != server.DefaultMaxPendingBytes {
		t.Fatalf("default server's stats: %+v", def)
	}

	srv, addr := echoServer(t,
		server.WithMaxConns(10), server.WithMaxConnsPerIP(2),
		server.WithRateLimit(0.01, 1), // one token per 100 s
		server.WithAdaptiveLimit(server.AdaptiveLimit{Initial: 50, Min: 5, Max: 100}),
		server.WithMaxConcurrentPerConn(100),
		server.WithMaxPendingBytes(1<<20))
	srv.SetMethodLimits("A", "Echo", server.MethodLimits{MaxConcurrent: 3})

	if _, refused := refusedOrServed(t, addr, nil); refused { // takes the token
		t.Fatal("first connection refused")
	}
	c := dial(t, addr)
	var out []byte
	if err := c.Call(context.Background(), "A", "Echo", []byte("x"), &out); fleet.CodeOf(err) != fleet.ResourceExhausted {
		t.Fatalf("call over the rate: %v", err)
	}
	if _, refused := refusedOrServed(t, addr, nil); !refused {
		t.Fatal("third connection from 127.0.0.1 served over a cap of 2")
	}

	got := srv.AdmissionStats()
	want := []server.AdmissionStat{
		{Stage: server.StageConns, Limit: 10, InUse: 2},
		{Stage: server.StageConnsPerIP, Limit: 2, InUse: 2, Refused: 1},
		{Stage: server.StageRate, Limit: 0.01, InUse: 1, Refused: 1},
		{Stage: server.StageMethodConcurrency, Service: "A", Method: "Echo", Limit: 3},
		{Stage: server.StageConnConcurrency, Limit: 100},
		{Stage: server.StageAdaptive, Limit: 50},
		{Stage: server.StageMemory, Limit: 1 << 20},
	}
	if len(got) != len(want) {
		t.Fatalf("stats: %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("stat %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if n := srv.RefusedConns(); n != 1 {
		t.Fatalf("RefusedConns = %d, want 1", n)
	}
	if l, inflight, shed := srv.AdaptiveLimitState(); l != 50 || inflight != 0 || shed != 0 {
		t.Fatalf("AdaptiveLimitState = %d %d %d", l, inflight, shed)
	}
}
