package etcd_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"

	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/registry/etcd"
	"github.com/fleetrpc/fleet/registry/internal/tcpproxy"
	"github.com/fleetrpc/fleet/registry/registrytest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func config(s *etcdServer, ttl time.Duration) etcd.Config {
	return etcd.Config{
		Endpoints:      []string{s.Endpoint()},
		TTL:            ttl,
		RequestTimeout: 2 * time.Second,
		Logger:         registrytest.Logger(),
	}
}

var (
	newRegistrar = registrytest.Constructor(etcd.NewRegistrar)
	newDiscovery = registrytest.Constructor(etcd.NewDiscovery)
)

func rawClient(t testing.TB, s *etcdServer) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Endpoint()}, DialTimeout: 5 * time.Second, Logger: zapNop})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestConformance(t *testing.T) {
	s := startEtcd(t)
	cfg := config(s, 2*time.Second)
	registrytest.Run(t,
		func(t *testing.T) registry.Registrar { return newRegistrar(t, cfg) },
		func(t *testing.T) registry.Discovery { return newDiscovery(t, cfg) },
		registrytest.Options{Timeout: 5 * time.Second, ExpiryTimeout: 8 * time.Second},
	)
}

// The record is where the package doc says, as JSON, under a lease of TTL
// seconds; a Prefix's trailing '/' is ignored.
func TestLayout(t *testing.T) {
	s := startEtcd(t)
	cfg := config(s, 3*time.Second)
	cfg.Prefix = "/custom/prefix/"
	r := newRegistrar(t, cfg)
	defer r.Close()
	svc := registrytest.ServiceName(t)
	in := registry.Instance{Service: svc, Addr: registrytest.Addr(1), Weight: 2}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.Register(ctx, in); err != nil {
		t.Fatal(err)
	}
	raw := rawClient(t, s)
	resp, err := raw.Get(ctx, "/custom/prefix/"+svc+"/"+in.Key())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("Get = %v, %v", resp, err)
	}
	kv := resp.Kvs[0]
	got, err := registry.Unmarshal(kv.Value)
	if err != nil || got.Weight != 2 {
		t.Fatalf("record %s: %+v, %v", kv.Value, got, err)
	}
	ttl, err := raw.TimeToLive(ctx, clientv3.LeaseID(kv.Lease))
	if err != nil || ttl.GrantedTTL != 3 {
		t.Fatalf("lease: %+v, %v", ttl, err)
	}
}

// A lease lost behind the Registrar's back (here revoked by another
// client, as etcd does when it expires) is replaced by a new one and the
// record comes back by itself.
func TestLeaseLostIsRestored(t *testing.T) {
	s := startEtcd(t)
	cfg := config(s, 3*time.Second)
	r, d := newRegistrar(t, cfg), newDiscovery(t, cfg)
	defer r.Close()
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	svc := registrytest.ServiceName(t)
	in := registry.Instance{Service: svc, Addr: registrytest.Addr(1)}
	if err := r.Register(ctx, in); err != nil {
		t.Fatal(err)
	}
	ch, err := d.Watch(ctx, svc)
	if err != nil {
		t.Fatal(err)
	}
	registrytest.WaitFor(t, svc, ch, 5*time.Second, registrytest.HasKeys(in.Key()))

	raw := rawClient(t, s)
	resp, err := raw.Get(ctx, "/fleet/services/"+svc+"/"+in.Key())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("Get = %v, %v", resp, err)
	}
	lease := clientv3.LeaseID(resp.Kvs[0].Lease)
	if _, err := raw.Revoke(ctx, lease); err != nil {
		t.Fatal(err)
	}
	registrytest.WaitFor(t, svc, ch, 5*time.Second, registrytest.HasKeys())
	start := time.Now()
	registrytest.WaitFor(t, svc, ch, 5*time.Second, registrytest.HasKeys(in.Key()))
	t.Logf("restored %v after the revocation was seen", time.Since(start).Round(10*time.Millisecond))

	resp, err = raw.Get(ctx, "/fleet/services/"+svc+"/"+in.Key())
	if err != nil || len(resp.Kvs) != 1 || clientv3.LeaseID(resp.Kvs[0].Lease) == lease {
		t.Fatalf("after restore: %v, %v", resp, err)
	}
	// The new lease is kept alive: the record outlives its TTL.
	registrytest.Quiet(t, svc, ch, 4*time.Second, registrytest.HasKeys())

	// An Update that finds its lease gone grants a new one by itself.
	resp, err = raw.Get(ctx, "/fleet/services/"+svc+"/"+in.Key())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("Get = %v, %v", resp, err)
	}
	if _, err := raw.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	in.Weight = 9
	if err := r.Update(ctx, in); err != nil {
		t.Fatalf("Update after the lease was revoked: %v", err)
	}
	registrytest.WaitFor(t, svc, ch, 5*time.Second, func(l []registry.Instance) bool { return len(l) == 1 && l[0].Weight == 9 })
	registrytest.Quiet(t, svc, ch, 4*time.Second, func(l []registry.Instance) bool { return len(l) != 1 || l[0].Weight != 9 })
}

// Stopping etcd leaves watchers with their last list and Instances
// answering from it; after etcd restarts (same data, same ports) the
// watch delivers the current list again, the Registrar's records are
// still there, and changes made afterwards are seen.
//
// The clients reach etcd through a loopback proxy that is cut just before
// etcd stops, as when its process dies: otherwise embed's graceful stop
// would wait 5s for the clients' open streams.
func TestEtcdRestart(t *testing.T) {
	s := startEtcd(t)
	p, err := tcpproxy.Start(s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	cfg := config(s, 3*time.Second)
	cfg.Endpoints = []string{"http://" + p.Addr()}
	r := newRegistrar(t, cfg)
	cfg.RequestTimeout = 500 * time.Millisecond
	d := newDiscovery(t, cfg)
	defer r.Close()
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	svc := registrytest.ServiceName(t)
	a := registry.Instance{Service: svc, Addr: registrytest.Addr(1)}
	b := registry.Instance{Service: svc, Addr: registrytest.Addr(2)}
	if err := r.Register(ctx, a); err != nil {
		t.Fatal(err)
	}
	ch, err := d.Watch(ctx, svc)
	if err != nil {
		t.Fatal(err)
	}
	registrytest.WaitFor(t, svc, ch, 5*time.Second, registrytest.HasKeys(a.Key()))

	p.Block()
	s.stop()
	// Nothing is delivered while etcd is down: no empty list, no close.
	registrytest.Quiet(t, svc, ch, 1500*time.Millisecond, func([]registry.Instance) bool { return true })
	list, err := d.Instances(ctx, svc)
	if err != nil || len(list) != 1 || list[0].Key() != a.Key() {
		t.Fatalf("Instances while etcd is down = %v, %v; want the last list", registrytest.Keys(list), err)
	}

	s.start()
	p.Unblock()
	// The current list is delivered again once the client reconnects.
	registrytest.WaitFor(t, svc, ch, 10*time.Second, registrytest.HasKeys(a.Key()))
	if err := r.Register(ctx, b); err != nil {
		t.Fatalf("Register after restart: %v", err)
	}
	registrytest.WaitFor(t, svc, ch, 5*time.Second, registrytest.HasKeys(a.Key(), b.Key()))
	if err := r.Deregister(ctx, a); err != nil {
		t.Fatalf("Deregister after restart: %v", err)
	}
	registrytest.WaitFor(t, svc, ch, 5*time.Second, registrytest.HasKeys(b.Key()))
	// b's lease is kept alive after the restart: b outlives its TTL.
	registrytest.Quiet(t, svc, ch, 4*time.Second, func(l []registry.Instance) bool { return len(l) != 1 })
}
