package e2e

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/internal/testutil"
	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/registry/etcd"
	"github.com/fleetrpc/fleet/registry/etcd/embedded"
	"github.com/fleetrpc/fleet/server"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// etcd's embedded server and client keep package-level goroutines.
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"),
		goleak.IgnoreAnyFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"),
	)
}

type Ping struct{ N int }
type Pong struct{ From string }

type node struct {
	srv   *server.Server
	addr  string
	reg   registry.Registrar
	calls atomic.Int64
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func startNode(t *testing.T, cfg etcd.Config, name string) *node {
	t.Helper()
	n := &node{srv: server.New(server.WithLogger(quiet()))}
	n.srv.RegisterFunction("Ping", "Do", func(ctx context.Context, in *Ping, out *Pong) error {
		n.calls.Add(1)
		out.From = name
		return nil
	})
	lis, err := n.srv.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n.addr = lis.Addr().String()
	done := make(chan struct{})
	go func() { defer close(done); n.srv.Serve(lis) }()
	if n.reg, err = etcd.NewRegistrar(cfg); err != nil {
		t.Fatal(err)
	}
	if err := n.srv.Publish(context.Background(), n.reg, registry.Instance{Service: "Ping", Addr: n.addr}, server.PublishConfig{LoadInterval: -1, DrainDelay: 50 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.srv.Shutdown(ctx)
		<-done
		n.reg.Close()
	})
	return n
}

// TestRegistryDownUnderLoad stops etcd for 10 s while callers keep calling:
// no call fails (clients keep the last list), and a server registered
// after etcd returns is discovered and served.
func TestRegistryDownUnderLoad(t *testing.T) {
	es, err := embedded.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer es.Close()
	cfg := etcd.Config{Endpoints: []string{es.Addr()}, TTL: 5 * time.Second, Logger: quiet()}
	a, b := startNode(t, cfg, "a"), startNode(t, cfg, "b")
	disc, err := etcd.NewDiscovery(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer disc.Close()
	x, err := client.NewXClient("Ping", disc)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	waitFor(t, 10*time.Second, func() bool { return len(x.Servers()) == 2 })

	load := testutil.StartLoad(20, time.Millisecond, func(int) error { return x.Call(context.Background(), "Do", &Ping{}, &Pong{}) })
	time.Sleep(300 * time.Millisecond)
	es.Stop()
	down := load.OK()
	time.Sleep(10 * time.Second)
	during := load.OK() - down
	if err := es.Start(); err != nil {
		t.Fatal(err)
	}
	c := startNode(t, cfg, "c")
	waitFor(t, 20*time.Second, func() bool { return c.calls.Load() > 0 })
	if _, n, first := load.Stop(); n != 0 {
		t.Fatalf("%d calls failed; first: %v", n, first)
	}
	if during == 0 {
		t.Fatal("no call succeeded while etcd was down")
	}
	t.Logf("%d calls while etcd was down; served a=%d b=%d c=%d", during, a.calls.Load(), b.calls.Load(), c.calls.Load())
}

func waitFor(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
