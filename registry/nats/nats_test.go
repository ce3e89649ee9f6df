package nats_test

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/registry/internal/tcpproxy"
	fnats "github.com/fleetrpc/fleet/registry/nats"
	"github.com/fleetrpc/fleet/registry/registrytest"
)

// The tests need the NATS server with JetStream that .ci/services.sh
// starts, or the one FLEET_TEST_NATS names ("host:port").
var natsAddr = cmp.Or(os.Getenv("FLEET_TEST_NATS"), "127.0.0.1:4222")

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// rawJS connects a plain client; it fails (not skips) the test with a hint
// when NATS is not running.
func rawJS(t testing.TB) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect("nats://"+natsAddr, nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatalf("NATS at %s: %v (run .ci/services.sh)", natsAddr, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// testBucket returns a bucket name unique to the test, deleted when it
// ends.
func testBucket(t testing.TB) string {
	t.Helper()
	_, js := rawJS(t)
	var b [6]byte
	rand.Read(b[:])
	name := "fleet_test_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := js.DeleteKeyValue(ctx, name); err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
			t.Logf("delete bucket %s: %v", name, err)
		}
	})
	return name
}

func config(addr, bucket string, ttl time.Duration) fnats.Config {
	return fnats.Config{URL: "nats://" + addr, Bucket: bucket, TTL: ttl, RequestTimeout: 2 * time.Second, Logger: registrytest.Logger()}
}

var (
	newRegistrar = registrytest.Constructor(fnats.NewRegistrar)
	newDiscovery = registrytest.Constructor(fnats.NewDiscovery)
)

func TestConformance(t *testing.T) {
	cfg := config(natsAddr, testBucket(t), 2*time.Second)
	registrytest.Run(t,
		func(t *testing.T) registry.Registrar { return newRegistrar(t, cfg) },
		func(t *testing.T) registry.Discovery { return newDiscovery(t, cfg) },
		registrytest.Options{Timeout: 5 * time.Second, ExpiryTimeout: 8 * time.Second},
	)
}

// The bucket and keys are as the package doc says.
func TestLayout(t *testing.T) {
	_, js := rawJS(t)
	bucket := testBucket(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := newRegistrar(t, config(natsAddr, bucket, 3*time.Second))
	defer r.Close()
	svc := registrytest.ServiceName(t)
	in := registry.Instance{Service: svc, Addr: registrytest.Addr(1), Network: "tls", Weight: 5}
	if err := r.Register(ctx, in); err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(ctx)
	if err != nil || st.TTL() != 3*time.Second || st.History() != 1 {
		t.Fatalf("bucket status: ttl %v history %d, %v", st.TTL(), st.History(), err)
	}
	k := svc + ".tls=40127=2E0=2E0=2E1=3A20001"
	e, err := kv.Get(ctx, k)
	if err != nil {
		t.Fatalf("Get %s: %v", k, err)
	}
	if got, err := registry.Unmarshal(e.Value()); err != nil || got.Weight != 5 {
		t.Fatalf("record %s: %+v, %v", e.Value(), got, err)
	}
}

// Bucket MaxAge really removes a key that is not put again, and our
// Discovery sees it go. Before nats-server 2.11 nothing announces the
// removal to a raw kv.Watch, which is why Watch re-reads every
// PollInterval; from 2.11 the bucket's LimitMarkerTTL makes the server
// publish a marker, and the Discovery (polling only every minute here)
// sees the expiry through it. (Run against a 2.11 server with
// FLEET_TEST_NATS=host:port.)
func TestMaxAgeExpiry(t *testing.T) {
	nc, js := rawJS(t)
	bucket := testBucket(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var major, minor int
	fmt.Sscanf(nc.ConnectedServerVersion(), "%d.%d", &major, &minor)
	markers := major > 2 || major == 2 && minor >= 11
	dcfg := config(natsAddr, bucket, time.Second)
	if markers {
		// Prove the expiry is seen through the marker, not a poll.
		dcfg.PollInterval = time.Minute
	}
	d := newDiscovery(t, dcfg)
	defer d.Close()
	svc := registrytest.ServiceName(t)
	ch, err := d.Watch(ctx, svc) // creates the bucket with MaxAge 1s
	if err != nil {
		t.Fatal(err)
	}
	registrytest.WaitFor(t, svc, ch, 5*time.Second, registrytest.HasKeys())
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := kv.Watch(ctx, svc+".>", jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Stop()

	in := registry.Instance{Service: svc, Addr: registrytest.Addr(1)}
	b, _ := in.Marshal()
	k := svc + "." + fnats.EncodeToken(in.Key())
	if _, err := kv.Put(ctx, k, b); err != nil {
		t.Fatal(err)
	}
	registrytest.WaitFor(t, svc, ch, 5*time.Second, registrytest.HasKeys(in.Key()))
	start := time.Now()
	registrytest.WaitFor(t, svc, ch, 5*time.Second, registrytest.HasKeys())
	t.Logf("Discovery saw the key age out %v after it was seen", time.Since(start).Round(10*time.Millisecond))
	if _, err := kv.Get(ctx, k); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("Get after MaxAge = %v; want ErrKeyNotFound", err)
	}

	var seen int
	timeout := time.After(500 * time.Millisecond)
collect:
	for {
		select {
		case e := <-raw.Updates():
			if e != nil && e.Operation() != jetstream.KeyValuePut {
				seen++
			}
		case <-timeout:
			break collect
		}
	}
	t.Logf("nats-server %s: a raw watcher saw %d expiry markers", nc.ConnectedServerVersion(), seen)
	if markers && seen == 0 {
		t.Errorf("nats-server %s supports limit markers but none was seen", nc.ConnectedServerVersion())
	}
}

// A Discovery cut off from NATS keeps its watchers' last list and
// answers Instances from it; when NATS is back it delivers the current
// list, including what changed meanwhile.
func TestDiscoveryOutage(t *testing.T) {
	bucket := testBucket(t)
	p, err := tcpproxy.Start(natsAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	r := newRegistrar(t, config(natsAddr, bucket, 3*time.Second))
	dcfg := config(p.Addr(), bucket, 3*time.Second)
	dcfg.RequestTimeout = 500 * time.Millisecond
	d := newDiscovery(t, dcfg)
	defer r.Close()
	defer d.Close()
	registrytest.DiscoveryOutage(t, r, d, p, registrytest.Options{Timeout: 5 * time.Second, Settle: 2 * time.Second})
}

// A Registrar cut off from NATS for longer than MaxAge loses its keys;
// when NATS is reachable again its refresh puts them back.
func TestRegistrarOutage(t *testing.T) {
	bucket := testBucket(t)
	p, err := tcpproxy.Start(natsAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	rcfg := config(p.Addr(), bucket, 2*time.Second)
	rcfg.RequestTimeout = 500 * time.Millisecond
	r := newRegistrar(t, rcfg)
	d := newDiscovery(t, config(natsAddr, bucket, 2*time.Second))
	defer r.Close()
	defer d.Close()
	registrytest.RegistrarOutage(t, r, d, p, registrytest.Options{Timeout: 5 * time.Second, ExpiryTimeout: 8 * time.Second})
}
