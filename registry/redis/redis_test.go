package redis_test

import (
	"cmp"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/registry/internal/tcpproxy"
	"github.com/fleetrpc/fleet/registry/redis"
	"github.com/fleetrpc/fleet/registry/registrytest"
)

// The tests need the Redis that .ci/services.sh starts, or the one
// FLEET_TEST_REDIS names ("host:port").
var redisAddr = cmp.Or(os.Getenv("FLEET_TEST_REDIS"), "127.0.0.1:6379")

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func config(addr string, ttl time.Duration) redis.Config {
	return redis.Config{Addr: addr, TTL: ttl, Logger: registrytest.Logger()}
}

var (
	newRegistrar = registrytest.Constructor(redis.NewRegistrar)
	newDiscovery = registrytest.Constructor(redis.NewDiscovery)
)

// rawClient is a plain client for inspecting and tampering with keys; it
// fails (not skips) the test with a hint when Redis is not running.
func rawClient(t testing.TB) *goredis.Client {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: redisAddr})
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("Redis at %s: %v (run .ci/services.sh)", redisAddr, err)
	}
	return c
}

func TestConformance(t *testing.T) {
	rawClient(t)
	cfg := config(redisAddr, 2*time.Second)
	registrytest.Run(t,
		func(t *testing.T) registry.Registrar { return newRegistrar(t, cfg) },
		func(t *testing.T) registry.Discovery { return newDiscovery(t, cfg) },
		registrytest.Options{Timeout: 5 * time.Second, ExpiryTimeout: 6 * time.Second},
	)
}

// Keys, values, expiries and notifications are as the package doc says;
// a service whose name extends another's past a ':' is not mixed in.
func TestLayout(t *testing.T) {
	raw := rawClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg := config(redisAddr, 3*time.Second)
	cfg.Prefix = "fleet-test:layout"
	r, d := newRegistrar(t, cfg), newDiscovery(t, cfg)
	defer r.Close()
	defer d.Close()
	svc := registrytest.ServiceName(t)

	sub := raw.Subscribe(ctx, "fleet-test:layout:"+svc)
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil { // the subscription confirmation
		t.Fatal(err)
	}
	in := registry.Instance{Service: svc, Addr: registrytest.Addr(1), Weight: 3}
	if err := r.Register(ctx, in); err != nil {
		t.Fatal(err)
	}
	msg, err := sub.ReceiveMessage(ctx)
	if err != nil || msg.Payload != "register "+in.Key() {
		t.Fatalf("notification %+v, %v", msg, err)
	}
	key := "fleet-test:layout:" + svc + ":" + in.Key()
	b, err := raw.Get(ctx, key).Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := registry.Unmarshal(b); err != nil || got.Weight != 3 {
		t.Fatalf("record %s: %+v, %v", b, got, err)
	}
	if ttl := raw.PTTL(ctx, key).Val(); ttl <= 0 || ttl > 3*time.Second {
		t.Fatalf("PTTL = %v; want (0, 3s]", ttl)
	}

	// "svc:x" is another service even though its keys match "svc:*".
	other := registry.Instance{Service: svc + ":x", Addr: registrytest.Addr(2)}
	if err := r.Register(ctx, other); err != nil {
		t.Fatal(err)
	}
	list, err := d.Instances(ctx, svc)
	if err != nil || len(list) != 1 || list[0].Key() != in.Key() {
		t.Fatalf("Instances = %v, %v", registrytest.Keys(list), err)
	}
	if err := r.Deregister(ctx, in); err != nil {
		t.Fatal(err)
	}
	if msg, err := sub.ReceiveMessage(ctx); err != nil || msg.Payload != "deregister "+in.Key() {
		t.Fatalf("notification %+v, %v", msg, err)
	}
	if n := raw.Exists(ctx, key).Val(); n != 0 {
		t.Fatal("key still there after Deregister")
	}
}

// A key that disappears behind the Registrar's back (a Redis restart or
// FLUSHDB, here a DEL) is set again at the next refresh and announced.
func TestLostKeyRestored(t *testing.T) {
	raw := rawClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cfg := config(redisAddr, 3*time.Second)
	r, d := newRegistrar(t, cfg), newDiscovery(t, cfg)
	defer r.Close()
	defer d.Close()
	svc := registrytest.ServiceName(t)
	in := registry.Instance{Service: svc, Addr: registrytest.Addr(1)}
	if err := r.Register(ctx, in); err != nil {
		t.Fatal(err)
	}
	key := "fleet:services:" + svc + ":" + in.Key()
	sub := raw.Subscribe(ctx, "fleet:services:"+svc)
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if err := raw.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	msg, err := sub.ReceiveMessage(ctx)
	if err != nil || msg.Payload != "restore "+in.Key() {
		t.Fatalf("notification %+v, %v", msg, err)
	}
	t.Logf("restored %v after the DEL", time.Since(start).Round(10*time.Millisecond))
	if n := raw.Exists(ctx, key).Val(); n != 1 {
		t.Fatal("key not restored")
	}
	registrytest.WaitInstances(t, d, svc, 5*time.Second, registrytest.HasKeys(in.Key()))
}

// A Discovery cut off from Redis keeps its watchers' last list and
// answers Instances from it; when Redis is back it delivers the current
// list, including what changed meanwhile.
func TestDiscoveryOutage(t *testing.T) {
	rawClient(t)
	p, err := tcpproxy.Start(redisAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	r := newRegistrar(t, config(redisAddr, 3*time.Second))
	dcfg := config(p.Addr(), 3*time.Second)
	dcfg.PollInterval = 300 * time.Millisecond
	d := newDiscovery(t, dcfg)
	defer r.Close()
	defer d.Close()
	registrytest.DiscoveryOutage(t, r, d, p, registrytest.Options{Timeout: 5 * time.Second, Settle: 1500 * time.Millisecond})
}

// A Registrar cut off from Redis for longer than TTL loses its keys to
// expiry; when Redis is reachable again its refresh sets them again.
func TestRegistrarOutage(t *testing.T) {
	rawClient(t)
	p, err := tcpproxy.Start(redisAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	r := newRegistrar(t, config(p.Addr(), 2*time.Second))
	d := newDiscovery(t, config(redisAddr, 2*time.Second))
	defer r.Close()
	defer d.Close()
	registrytest.RegistrarOutage(t, r, d, p, registrytest.Options{Timeout: 5 * time.Second, ExpiryTimeout: 6 * time.Second})
}

// With KeyspaceEvents, an expiry reaches watchers through the keyspace
// notification, long before the next poll.
func TestKeyspaceEvents(t *testing.T) {
	raw := rawClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	before, err := raw.ConfigGet(ctx, "notify-keyspace-events").Result()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		raw.ConfigSet(context.Background(), "notify-keyspace-events", before["notify-keyspace-events"])
	})
	dcfg := config(redisAddr, time.Second)
	dcfg.KeyspaceEvents = true
	dcfg.PollInterval = time.Minute
	d := newDiscovery(t, dcfg)
	defer d.Close()
	r := newRegistrar(t, config(redisAddr, time.Second))
	defer r.Close()
	svc := registrytest.ServiceName(t)
	a := registry.Instance{Service: svc, Addr: registrytest.Addr(1)}
	ch, err := d.Watch(ctx, svc)
	if err != nil {
		t.Fatal(err)
	}
	registrytest.WaitFor(t, svc, ch, 5*time.Second, registrytest.HasKeys())
	flags := raw.ConfigGet(ctx, "notify-keyspace-events").Val()["notify-keyspace-events"]
	if !strings.Contains(flags, "K") || !(strings.Contains(flags, "x") || strings.Contains(flags, "A")) {
		t.Fatalf("notify-keyspace-events = %q; want K and x", flags)
	}
	if err := r.Register(ctx, a); err != nil {
		t.Fatal(err)
	}
	registrytest.WaitFor(t, svc, ch, 5*time.Second, registrytest.HasKeys(a.Key()))
	r.Close()
	start := time.Now()
	registrytest.WaitFor(t, svc, ch, 10*time.Second, registrytest.HasKeys())
	t.Logf("expiry seen %v after Close (TTL 1s, poll interval 1m)", time.Since(start).Round(10*time.Millisecond))
}
