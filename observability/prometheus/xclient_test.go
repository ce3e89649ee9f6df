package fleetprom_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	fleetprom "github.com/fleetrpc/fleet/observability/prometheus"
	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/registry/static"
	"github.com/fleetrpc/fleet/server"
	"github.com/prometheus/client_golang/prometheus"
)

// TestXClientMetrics: an XClient call whose first attempt fails with
// Unavailable fails over; the metrics show two servers known, one pick on
// each, one retry, two attempts (one unavailable, one ok), and breaker
// states for both servers.
func TestXClientMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	cm := fleetprom.NewClientMetrics()
	reg.MustRegister(cm)
	var calls atomic.Int64
	var instances []registry.Instance
	for i := 0; i < 2; i++ {
		srv := server.New()
		if err := srv.RegisterFunction("Echo", "Do", func(ctx context.Context, in *int, out *int) error {
			if calls.Add(1) == 1 {
				return fleet.NewError(fleet.Unavailable, "busy")
			}
			*out = *in
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		instances = append(instances, registry.Instance{Service: "Echo", Addr: serveB(t, srv)})
	}
	disc, err := static.NewDiscovery(static.Config{Instances: instances})
	if err != nil {
		t.Fatal(err)
	}
	x, err := client.NewXClient("Echo", disc, client.WithFailMode(client.Failover), cm.XOption())
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	in, out := 5, 0
	if err := x.Call(context.Background(), "Do", &in, &out); err != nil || out != 5 {
		t.Fatalf("call: %v %d", err, out)
	}
	fams := families(t, reg)
	if g := find(fams, "fleet_client_servers", map[string]string{"service": "Echo"}).GetGauge().GetValue(); g != 2 {
		t.Errorf("fleet_client_servers = %v, want 2", g)
	}
	for _, in := range instances {
		l := map[string]string{"service": "Echo", "server": in.Key()}
		if v := counter(t, fams, "fleet_client_picks_total", l); v != 1 {
			t.Errorf("picks of %s = %v, want 1", in.Key(), v)
		}
		if m := find(fams, "fleet_client_breaker_state", l); m == nil {
			t.Errorf("no breaker state for %s", in.Key())
		}
	}
	if v := counter(t, fams, "fleet_client_retries_total", map[string]string{"service": "Echo", "method": "Do"}); v != 1 {
		t.Errorf("retries = %v, want 1", v)
	}
	for code, want := range map[string]float64{"unavailable": 1, "ok": 1} {
		if v := counter(t, fams, "fleet_client_handled_total", map[string]string{"service": "Echo", "method": "Do", "code": code}); v != want {
			t.Errorf("handled{code=%s} = %v, want %v", code, v, want)
		}
	}
}
