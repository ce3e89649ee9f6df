package fleetprom_test

import (
	"context"
	"testing"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	fleetprom "github.com/fleetrpc/fleet/observability/prometheus"
	"github.com/fleetrpc/fleet/server"
	"github.com/prometheus/client_golang/prometheus"
)

// TestAdmissionCollector: the collector exports each admission stage of a
// real server, with the method of a per-method limit; a call refused by a
// method's rate limit shows in fleet_server_admission_refused_total.
func TestAdmissionCollector(t *testing.T) {
	srv := server.New(server.WithMethodRateLimit("Arith", "Add", 0.01, 1))
	reg := prometheus.NewRegistry()
	reg.MustRegister(fleetprom.NewAdmissionCollector(srv, nil))
	c, err := client.Dial(context.Background(), "tcp", serve(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var sum int
	if err := c.Call(context.Background(), "Arith", "Add", &Args{1, 2}, &sum); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(context.Background(), "Arith", "Add", &Args{1, 2}, &sum); fleet.CodeOf(err) != fleet.ResourceExhausted {
		t.Fatalf("second call over the rate: %v", err)
	}
	fams := families(t, reg)
	method := map[string]string{"stage": server.StageMethodRate, "service": "Arith", "method": "Add"}
	if n := counter(t, fams, "fleet_server_admission_refused_total", method); n != 1 {
		t.Fatalf("refused_total = %v, want 1", n)
	}
	if m := find(fams, "fleet_server_admission_limit", method); m == nil || m.GetGauge().GetValue() != 0.01 {
		t.Fatalf("limit of the method's rate: %v", m)
	}
	mem := map[string]string{"stage": server.StageMemory, "service": "", "method": ""}
	if m := find(fams, "fleet_server_admission_limit", mem); m == nil || m.GetGauge().GetValue() != server.DefaultMaxPendingBytes {
		t.Fatalf("limit of the memory budget: %v", m)
	}
}
