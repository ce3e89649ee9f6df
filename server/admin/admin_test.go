package admin_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/internal/testutil"
	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/registry/static"
	"github.com/fleetrpc/fleet/server"
	"github.com/fleetrpc/fleet/server/admin"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Arith is an application service to publish.
type Arith struct{}

func (Arith) Add(_ context.Context, in *[2]int, out *int) error { *out = in[0] + in[1]; return nil }

func dial(t *testing.T, addr string) *client.Client {
	t.Helper()
	c, err := client.Dial(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitRecord polls the table until a record of service matches ok
// (bounded by 10 s).
func waitRecord(t *testing.T, d registry.Discovery, service string, ok func(registry.Instance) bool) registry.Instance {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		list, err := d.Instances(context.Background(), service)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) == 1 && ok(list[0]) {
			return list[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("records of %s: %+v", service, list)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAdminSteer changes the weight and state of published records
// through fleet.Admin; the registry sees the change at once and the load
// reports keep it.
func TestAdminSteer(t *testing.T) {
	table, err := static.NewTable(static.Config{})
	if err != nil {
		t.Fatal(err)
	}
	reg := table.Registrar()
	defer reg.Close()
	disc := table.Discovery()
	defer disc.Close()

	srv := server.New()
	if err := admin.Register(srv, admin.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}); err != nil {
		t.Fatal(err)
	}
	if err := srv.Register(Arith{}); err != nil {
		t.Fatal(err)
	}
	addr := testutil.Serve(t, srv)
	ctx := context.Background()
	for _, svc := range []string{"Arith", "Other"} {
		in := registry.Instance{Service: svc, Addr: addr, Weight: 1}
		if err := srv.Publish(ctx, reg, in, server.PublishConfig{LoadInterval: 20 * time.Millisecond, DrainDelay: time.Millisecond}); err != nil {
			t.Fatal(err)
		}
	}
	c := dial(t, addr)
	var pub admin.Published
	if err := c.Call(ctx, admin.Service, "Steer", &admin.SteerRequest{Service: "Arith", Weight: 5, State: registry.Draining}, &pub); err != nil {
		t.Fatal(err)
	}
	if len(pub.Instances) != 2 {
		t.Fatalf("published %+v", pub)
	}
	got := waitRecord(t, disc, "Arith", func(in registry.Instance) bool { return in.Weight == 5 && in.State == registry.Draining })
	// Later load reports keep the change (several intervals pass).
	time.Sleep(100 * time.Millisecond)
	got = waitRecord(t, disc, "Arith", func(in registry.Instance) bool { return true })
	if got.Weight != 5 || got.State != registry.Draining {
		t.Fatalf("a load report undid the change: %+v", got)
	}
	waitRecord(t, disc, "Other", func(in registry.Instance) bool { return in.Weight == 1 && in.State == "" })

	if err := c.Call(ctx, admin.Service, "Steer", &admin.SteerRequest{Service: "Arith", State: registry.Active}, &pub); err != nil {
		t.Fatal(err)
	}
	waitRecord(t, disc, "Arith", func(in registry.Instance) bool { return in.Weight == 5 && in.State == registry.Active })

	for _, tc := range []struct {
		req  admin.SteerRequest
		code fleet.Code
	}{
		{admin.SteerRequest{Service: "Arith", Weight: -1}, fleet.InvalidArgument},
		{admin.SteerRequest{Service: "Arith", State: "gone"}, fleet.InvalidArgument},
		{admin.SteerRequest{Service: "Nope", Weight: 2}, fleet.NotFound},
	} {
		if err := c.Call(ctx, admin.Service, "Steer", &tc.req, &pub); fleet.CodeOf(err) != tc.code {
			t.Errorf("steer %+v: %v, want %s", tc.req, err, tc.code)
		}
	}
	if err := c.Call(ctx, admin.Service, "Published", &admin.Request{}, &pub); err != nil || len(pub.Instances) != 2 {
		t.Fatalf("published: %v %+v", err, pub)
	}
}

// TestAdminOffByDefault: without Register there is no fleet.Admin; a
// second Register fails; with an auth function it is guarded like any
// call.
func TestAdminOffByDefault(t *testing.T) {
	c := dial(t, testutil.Serve(t, server.New()))
	err := c.Call(context.Background(), admin.Service, "Steer", &admin.SteerRequest{Weight: 2}, &admin.Published{})
	if fleet.CodeOf(err) != fleet.NotFound {
		t.Fatalf("admin without Register: %v", err)
	}
	guarded := server.New(server.WithAuth(func(context.Context, *fleet.CallInfo, string) error { return errors.New("no") }))
	if err := admin.Register(guarded, admin.Config{}); err != nil {
		t.Fatal(err)
	}
	if err := admin.Register(guarded, admin.Config{}); err == nil {
		t.Fatal("second Register succeeded")
	}
	c = dial(t, testutil.Serve(t, guarded))
	err = c.Call(context.Background(), admin.Service, "Steer", &admin.SteerRequest{Weight: 2}, &admin.Published{})
	if fleet.CodeOf(err) != fleet.Unauthenticated {
		t.Fatalf("admin without credentials: %v", err)
	}
}
