package zookeeper_test

import (
	"cmp"
	"context"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/goleak"

	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/registry/internal/tcpproxy"
	"github.com/fleetrpc/fleet/registry/registrytest"
	"github.com/fleetrpc/fleet/registry/zookeeper"
)

// The tests need the ZooKeeper that .ci/services.sh starts, or the one
// FLEET_TEST_ZOOKEEPER names ("host:port").
var zkAddr = cmp.Or(os.Getenv("FLEET_TEST_ZOOKEEPER"), "127.0.0.1:2181")

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func config(addr string, timeout time.Duration) zookeeper.Config {
	return zookeeper.Config{Servers: []string{addr}, SessionTimeout: timeout, Logger: registrytest.Logger()}
}

var (
	newRegistrar = registrytest.Constructor(zookeeper.NewRegistrar)
	newDiscovery = registrytest.Constructor(zookeeper.NewDiscovery)
)

// rawConn is a plain zk client for inspecting and tampering with znodes.
func rawConn(t testing.TB) *zk.Conn {
	t.Helper()
	conn, _, err := zk.Connect([]string{zkAddr}, 4*time.Second, zk.WithLogger(discard{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	return conn
}

type discard struct{}

func (discard) Printf(string, ...any) {}

// requireServer fails (not skips) the test with a hint when ZooKeeper is
// not running.
func requireServer(t testing.TB) {
	t.Helper()
	conn := rawConn(t)
	if _, _, err := conn.Exists("/"); err != nil {
		t.Fatalf("ZooKeeper at %s: %v (run .ci/services.sh)", zkAddr, err)
	}
}

func TestConformance(t *testing.T) {
	requireServer(t)
	cfg := config(zkAddr, 4*time.Second)
	registrytest.Run(t,
		func(t *testing.T) registry.Registrar { return newRegistrar(t, cfg) },
		func(t *testing.T) registry.Discovery { return newDiscovery(t, cfg) },
		registrytest.Options{Timeout: 5 * time.Second},
	)
}

// The znode is where the package doc says: an ephemeral node of the
// Registrar's session under persistent parents, holding the JSON record.
func TestLayout(t *testing.T) {
	requireServer(t)
	cfg := config(zkAddr, 4*time.Second)
	cfg.Root = "/fleet-test/layout/"
	r := newRegistrar(t, cfg)
	defer r.Close()
	svc := registrytest.ServiceName(t)
	in := registry.Instance{Service: svc, Addr: registrytest.Addr(1), Network: "tls", Weight: 4}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.Register(ctx, in); err != nil {
		t.Fatal(err)
	}
	raw := rawConn(t)
	p := "/fleet-test/layout/" + svc + "/" + url.QueryEscape("tls@127.0.0.1:20001")
	data, stat, err := raw.Get(p)
	if err != nil {
		t.Fatalf("Get %s: %v", p, err)
	}
	if got, err := registry.Unmarshal(data); err != nil || got.Weight != 4 {
		t.Fatalf("record %s: %+v, %v", data, got, err)
	}
	if stat.EphemeralOwner == 0 {
		t.Fatal("instance znode is not ephemeral")
	}
	_, parent, err := raw.Get("/fleet-test/layout/" + svc)
	if err != nil || parent.EphemeralOwner != 0 {
		t.Fatalf("service znode: %+v, %v", parent, err)
	}
	// Close ends the session: the znode goes at once.
	r.Close()
	if ok, _, err := raw.Exists(p); err != nil || ok {
		t.Fatalf("after Close: exists=%v err=%v", ok, err)
	}
}

// A znode left at the instance's path by another session (the server's
// previous process, within its session timeout) is replaced, so the
// record does not vanish when that old session ends.
func TestReplacesStaleZnode(t *testing.T) {
	requireServer(t)
	cfg := config(zkAddr, 4*time.Second)
	svc := registrytest.ServiceName(t)
	in := registry.Instance{Service: svc, Addr: registrytest.Addr(1), Weight: 2}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	old := newRegistrar(t, cfg)
	defer old.Close()
	if err := old.Register(ctx, registry.Instance{Service: svc, Addr: registrytest.Addr(1), Weight: 1}); err != nil {
		t.Fatal(err)
	}
	r, d := newRegistrar(t, cfg), newDiscovery(t, cfg)
	defer r.Close()
	defer d.Close()
	if err := r.Register(ctx, in); err != nil {
		t.Fatal(err)
	}
	old.Close()
	ch, err := d.Watch(ctx, svc)
	if err != nil {
		t.Fatal(err)
	}
	got := registrytest.WaitFor(t, svc, ch, 5*time.Second, registrytest.HasKeys(in.Key()))
	if got[0].Weight != 2 {
		t.Fatalf("record %+v; want the new one", got[0])
	}
	registrytest.Quiet(t, svc, ch, time.Second, func(l []registry.Instance) bool { return len(l) != 1 })
}

// When the Registrar's session expires (its network is cut for longer
// than the session timeout) ZooKeeper deletes its znodes; once the
// network is back the client opens a new session and the Registrar
// creates them again by itself, with the data of the latest Update.
func TestSessionExpiryRestores(t *testing.T) {
	requireServer(t)
	p, err := tcpproxy.Start(zkAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	r := newRegistrar(t, config(p.Addr(), 2*time.Second))
	d := newDiscovery(t, config(zkAddr, 4*time.Second))
	defer r.Close()
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	svc := registrytest.ServiceName(t)
	a := registry.Instance{Service: svc, Addr: registrytest.Addr(1)}
	b := registry.Instance{Service: svc, Addr: registrytest.Addr(2)}
	if err := r.Register(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(ctx, b); err != nil {
		t.Fatal(err)
	}
	ch, err := d.Watch(ctx, svc)
	if err != nil {
		t.Fatal(err)
	}
	registrytest.WaitFor(t, svc, ch, 5*time.Second, registrytest.HasKeys(a.Key(), b.Key()))

	p.Block()
	start := time.Now()
	registrytest.WaitFor(t, svc, ch, 15*time.Second, registrytest.HasKeys())
	t.Logf("session expired %v after the network was cut", time.Since(start).Round(10*time.Millisecond))
	// An Update while disconnected fails, but its data is what comes back.
	b.Load.InFlight = 42
	if err := r.Update(ctx, b); err == nil {
		t.Log("Update succeeded while disconnected") // queued until reconnect: also fine
	}
	p.Unblock()
	start = time.Now()
	got := registrytest.WaitFor(t, svc, ch, 10*time.Second, registrytest.HasKeys(a.Key(), b.Key()))
	t.Logf("znodes restored %v after the network came back", time.Since(start).Round(10*time.Millisecond))
	if got[1].Load.InFlight != 42 {
		t.Errorf("restored record of b: %+v; want the updated one", got[1])
	}
	// The new session works normally.
	c := registry.Instance{Service: svc, Addr: registrytest.Addr(3)}
	if err := r.Register(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := r.Deregister(ctx, a); err != nil {
		t.Fatal(err)
	}
	registrytest.WaitFor(t, svc, ch, 5*time.Second, registrytest.HasKeys(b.Key(), c.Key()))
}

// A Discovery cut off from ZooKeeper keeps its watchers' last list and
// answers Instances from it; when it reconnects (here after its own
// session expired, so all its watches were lost) it delivers the current
// list, including what changed meanwhile, and keeps watching.
func TestDiscoveryReconnects(t *testing.T) {
	requireServer(t)
	p, err := tcpproxy.Start(zkAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	r := newRegistrar(t, config(zkAddr, 4*time.Second))
	d := newDiscovery(t, config(p.Addr(), 2*time.Second))
	defer r.Close()
	defer d.Close()
	// Settle is longer than the session timeout: the Discovery's session
	// expires while it is cut off.
	registrytest.DiscoveryOutage(t, r, d, p, registrytest.Options{Timeout: 5 * time.Second, Settle: 5 * time.Second})
}
