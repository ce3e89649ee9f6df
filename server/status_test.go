package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/fleetrpc/fleet/server"
)

// TestServingStatus: SERVING for the server and its registered services,
// unknown (ok false) for others, the status set with SetServingStatus
// until cleared, a status set for a service not (yet) registered, and
// NOT_SERVING from the moment Shutdown begins (read from an OnShutdown
// function, while the server still serves calls) whatever was set. The
// wire form is tested in package server/health.
func TestServingStatus(t *testing.T) {
	srv, _, _ := newServer(t)
	for _, svc := range []string{"", "Arith", "Svc"} {
		if st, ok := srv.ServingStatus(svc); !ok || st != server.StatusServing {
			t.Errorf("ServingStatus(%q) = %v, %v; want SERVING", svc, st, ok)
		}
	}
	if st, ok := srv.ServingStatus("Nope"); ok {
		t.Errorf("ServingStatus(Nope) = %v, known", st)
	}
	srv.SetServingStatus("Arith", server.StatusNotServing)
	if st, ok := srv.ServingStatus("Arith"); !ok || st != server.StatusNotServing {
		t.Errorf("ServingStatus(Arith) after SetServingStatus = %v, %v; want NOT_SERVING", st, ok)
	}
	srv.SetServingStatus("Arith", server.StatusUnknown)
	if st, _ := srv.ServingStatus("Arith"); st != server.StatusServing {
		t.Errorf("ServingStatus(Arith) after clearing = %v, want SERVING", st)
	}
	srv.SetServingStatus("Later", server.StatusServing) // set before registration
	if st, ok := srv.ServingStatus("Later"); !ok || st != server.StatusServing {
		t.Errorf("ServingStatus(Later) = %v, %v; want SERVING", st, ok)
	}
	srv.SetServingStatus("Svc", server.StatusServing)

	during := make(chan server.ServingStatus, 3)
	srv.OnShutdown(func(context.Context) {
		for _, svc := range []string{"", "Arith", "Svc"} {
			st, _ := srv.ServingStatus(svc)
			during <- st
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
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
