package mdns_test

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/registry/mdns"
	"github.com/fleetrpc/fleet/registry/registrytest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// loopback returns the config for mDNS on the loopback interface only, so
// no multicast leaves the host. It fails the test when multicast does not
// work there; set FLEET_SKIP_MULTICAST=1 to skip those tests instead
// (loudly) on machines without it.
func loopback(t *testing.T) mdns.Config {
	t.Helper()
	lo, err := loopbackInterface()
	if err != nil {
		t.Fatal(err)
	}
	cfg := mdns.Config{
		Interface:    lo,
		QueryTimeout: 300 * time.Millisecond,
		Interval:     400 * time.Millisecond,
		Expiry:       1500 * time.Millisecond,
		Logger:       registrytest.Logger(),
	}
	probeMulticast(t, cfg)
	return cfg
}

func loopbackInterface() (*net.Interface, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	for i := range ifs {
		if ifs[i].Flags&net.FlagLoopback != 0 && ifs[i].Flags&net.FlagUp != 0 {
			return &ifs[i], nil
		}
	}
	return nil, errors.New("no loopback interface is up")
}

// probeMulticast advertises one instance and looks it up.
func probeMulticast(t *testing.T, cfg mdns.Config) {
	t.Helper()
	r, _ := mdns.NewRegistrar(cfg)
	d, _ := mdns.NewDiscovery(cfg)
	defer r.Close()
	defer d.Close()
	svc := registrytest.ServiceName(t) + "-probe"
	in := registry.Instance{Service: svc, Addr: "127.0.0.1:1"}
	ctx := context.Background()
	err := r.Register(ctx, in)
	var list []registry.Instance
	for i := 0; err == nil && len(list) == 0 && i < 3; i++ {
		list, err = d.Instances(ctx, svc)
	}
	if err == nil && len(list) == 1 {
		return
	}
	msg := "mDNS multicast does not work on the loopback interface"
	if err != nil {
		msg += ": " + err.Error()
	}
	if os.Getenv("FLEET_SKIP_MULTICAST") == "1" {
		t.Skip("SKIPPED because FLEET_SKIP_MULTICAST=1: " + msg)
	}
	t.Fatal(msg + " (set FLEET_SKIP_MULTICAST=1 to skip the multicast tests)")
}

func TestConformance(t *testing.T) {
	cfg := loopback(t)
	registrytest.Run(t,
		func(t *testing.T) registry.Registrar { r, _ := mdns.NewRegistrar(cfg); return r },
		func(t *testing.T) registry.Discovery { d, _ := mdns.NewDiscovery(cfg); return d },
		registrytest.Options{Timeout: 5 * time.Second, ExpiryTimeout: 5 * time.Second, TCPOnly: true, NoServiceLister: true},
	)
}

// An address without a host is advertised with the interface's addresses
// and discovered with the one the answer carried.
func TestUnspecifiedHost(t *testing.T) {
	cfg := loopback(t)
	r, _ := mdns.NewRegistrar(cfg)
	d, _ := mdns.NewDiscovery(cfg)
	defer r.Close()
	defer d.Close()
	svc := registrytest.ServiceName(t)
	ctx := context.Background()
	if err := r.Register(ctx, registry.Instance{Service: svc, Addr: ":20001"}); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(ctx, registry.Instance{Service: svc, Addr: "0.0.0.0:20002"}); err != nil {
		t.Fatal(err)
	}
	registrytest.WaitInstances(t, d, svc, 5*time.Second, registrytest.HasKeys("127.0.0.1:20001", "127.0.0.1:20002"))
}

// What mDNS cannot advertise is refused with a clear error.
func TestRegisterRefuses(t *testing.T) {
	r, _ := mdns.NewRegistrar(mdns.Config{Logger: registrytest.Logger()})
	defer r.Close()
	ctx := context.Background()
	for name, tc := range map[string]struct {
		in   registry.Instance
		want string
	}{
		"unix socket": {registry.Instance{Service: "S", Addr: "/tmp/s.sock", Network: "unix"}, `cannot advertise a "unix" address`},
		"no port":     {registry.Instance{Service: "S", Addr: "127.0.0.1"}, "missing port"},
		"port 0":      {registry.Instance{Service: "S", Addr: "127.0.0.1:0"}, "bad port"},
		"long TXT":    {registry.Instance{Service: "S", Addr: "127.0.0.1:1", Meta: map[string]string{"k": strings.Repeat("v", 300)}}, "the limit is 255"},
		"invalid":     {registry.Instance{Service: "S"}, "no address"},
	} {
		err := r.Register(ctx, tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Register = %v; want an error containing %q", name, err, tc.want)
		}
	}
}
