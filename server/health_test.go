package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/server"
)

func checkHealth(t *testing.T, ctx context.Context, c interface {
	Call(ctx context.Context, service, method string, args, reply any) error
}, service string) (server.ServingStatus, error) {
	t.Helper()
	var resp server.HealthCheckResponse
	err := c.Call(ctx, server.HealthService, "Check", &server.HealthCheckRequest{Service: service}, &resp)
	return resp.Status, err
}

// TestHealth: the built-in health service answers over the native
// protocol: SERVING for the server and its services, NotFound for an
// unknown service, the status set with SetServingStatus, and NOT_SERVING
// once Shutdown begins (checked from an OnShutdown function, while the
// server still serves calls).
func TestHealth(t *testing.T) {
	srv, _, addr := newServer(t)
	c := dial(t, addr)
	ctx := context.Background()
	for _, tc := range []struct {
		service string
		want    server.ServingStatus
	}{{"", server.StatusServing}, {"Arith", server.StatusServing}, {"Svc", server.StatusServing}} {
		if st, err := checkHealth(t, ctx, c, tc.service); err != nil || st != tc.want {
			t.Errorf("Check(%q) = %v, %v; want %v", tc.service, st, err, tc.want)
		}
	}
	if _, err := checkHealth(t, ctx, c, "Nope"); fleet.CodeOf(err) != fleet.NotFound {
		t.Errorf("Check(Nope): %v, want not_found", err)
	}
	srv.SetServingStatus("Arith", server.StatusNotServing)
	if st, err := checkHealth(t, ctx, c, "Arith"); err != nil || st != server.StatusNotServing {
		t.Errorf("Check(Arith) after SetServingStatus = %v, %v; want NOT_SERVING", st, err)
	}
	srv.SetServingStatus("Arith", server.StatusUnknown)
	if st, _ := checkHealth(t, ctx, c, "Arith"); st != server.StatusServing {
		t.Errorf("Check(Arith) after clearing = %v, want SERVING", st)
	}
	srv.SetServingStatus("Later", server.StatusServing) // set before registration
	if st, err := checkHealth(t, ctx, c, "Later"); err != nil || st != server.StatusServing {
		t.Errorf("Check(Later) = %v, %v; want SERVING", st, err)
	}

	during := make(chan server.ServingStatus, 2)
	srv.OnShutdown(func(context.Context) {
		for _, svc := range []string{"", "Arith"} {
			st, err := checkHealth(t, ctx, c, svc)
			if err != nil {
				t.Errorf("Check(%q) during shutdown: %v", svc, err)
			}
			during <- st
		}
	})
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	close(during)
	for st := range during {
		if st != server.StatusNotServing {
			t.Errorf("status once Shutdown began = %v, want NOT_SERVING", st)
		}
	}
	if st, ok := srv.ServingStatus(""); !ok || st != server.StatusNotServing {
		t.Errorf("ServingStatus after Shutdown = %v %v", st, ok)
	}
}
