package health_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/internal/testutil"
	"github.com/fleetrpc/fleet/server"
	"github.com/fleetrpc/fleet/server/health"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Arith is an application service for the health checks to name.
type Arith struct{}

func (Arith) Add(_ context.Context, in *[2]int, out *int) error { *out = in[0] + in[1]; return nil }

func dial(t *testing.T, addr string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.Dial(context.Background(), "tcp", addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func check(ctx context.Context, c *client.Client, service string) (server.ServingStatus, error) {
	var resp health.CheckResponse
	err := c.Call(ctx, health.Service, "Check", &health.CheckRequest{Service: service}, &resp)
	return resp.Status, err
}

// TestHealth: fleet.Health.Check answers over the native protocol:
// SERVING for the server and its services, NotFound for an unknown
// service, the status set with SetServingStatus, and NOT_SERVING once
// Shutdown begins (asked from an OnShutdown function, while the server
// still serves calls).
func TestHealth(t *testing.T) {
	srv := server.New()
	if err := health.Register(srv); err != nil {
		t.Fatal(err)
	}
	if err := srv.Register(Arith{}); err != nil {
		t.Fatal(err)
	}
	c := dial(t, testutil.Serve(t, srv))
	ctx := context.Background()
	for _, svc := range []string{"", "Arith", health.Service} {
		if st, err := check(ctx, c, svc); err != nil || st != server.StatusServing {
			t.Errorf("Check(%q) = %v, %v; want SERVING", svc, st, err)
		}
	}
	if _, err := check(ctx, c, "Nope"); fleet.CodeOf(err) != fleet.NotFound {
		t.Errorf("Check(Nope): %v, want not_found", err)
	}
	srv.SetServingStatus("Arith", server.StatusNotServing)
	if st, err := check(ctx, c, "Arith"); err != nil || st != server.StatusNotServing {
		t.Errorf("Check(Arith) after SetServingStatus = %v, %v; want NOT_SERVING", st, err)
	}
	srv.SetServingStatus("Arith", server.StatusUnknown)
	if st, err := check(ctx, c, "Arith"); err != nil || st != server.StatusServing {
		t.Errorf("Check(Arith) after clearing = %v, %v; want SERVING", st, err)
	}

	during := make(chan server.ServingStatus, 2)
	srv.OnShutdown(func(context.Context) {
		for _, svc := range []string{"", "Arith"} {
			st, err := check(ctx, c, svc)
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
	if len(during) != 2 {
		t.Fatalf("%d answers during shutdown, want 2", len(during))
	}
	for st := range during {
		if st != server.StatusNotServing {
			t.Errorf("Check once Shutdown began = %v, want NOT_SERVING", st)
		}
	}
}

// TestHealthRegistration: a server serves no fleet.Health until
// Register; a second Register fails; with an auth function, a health
// check without a token is refused like any call.
func TestHealthRegistration(t *testing.T) {
	ctx := context.Background()
	plain := server.New()
	if _, err := check(ctx, dial(t, testutil.Serve(t, plain)), ""); fleet.CodeOf(err) != fleet.NotFound {
		t.Errorf("Check before Register: %v, want not_found", err)
	}
	if err := health.Register(plain); err != nil {
		t.Fatal(err)
	}
	if err := health.Register(plain); err == nil {
		t.Error("second Register succeeded")
	}

	guarded := server.New(server.WithAuth(func(_ context.Context, _ *fleet.CallInfo, token string) error {
		if token != "secret" {
			return errors.New("bad token")
		}
		return nil
	}))
	if err := health.Register(guarded); err != nil {
		t.Fatal(err)
	}
	addr := testutil.Serve(t, guarded)
	if _, err := check(ctx, dial(t, addr), ""); fleet.CodeOf(err) != fleet.Unauthenticated {
		t.Errorf("Check without a token: %v, want unauthenticated", err)
	}
	if st, err := check(ctx, dial(t, addr, client.WithAuthToken("secret")), ""); err != nil || st != server.StatusServing {
		t.Errorf("Check with the token = %v, %v; want SERVING", st, err)
	}
}
