package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/registry/etcd/embedded"
	"github.com/fleetrpc/fleet/registry/registrytest"
)

// TestListRegistry registers instances of two services in each registry
// (an embedded etcd, and the ZooKeeper, Redis and NATS servers that
// .ci/services.sh starts) and checks that `fleet list scheme://host:port`
// shows both services with their instances' addresses, weights and
// states, as text and as JSON. The external registries are shared, so
// the services have unique names and only they are checked.
func TestListRegistry(t *testing.T) {
	etcdSrv, err := embedded.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer etcdSrv.Close()
	for _, url := range []string{"etcd://" + etcdSrv.Addr(), "zookeeper://127.0.0.1:2181", "redis://127.0.0.1:6379", "nats://127.0.0.1:4222"} {
		t.Run(strings.Split(url, ":")[0], func(t *testing.T) {
			b, err := openRegistry(url, "")
			if err != nil {
				t.Fatal(err)
			}
			defer b.close()
			reg, err := b.newRegistrar()
			if err != nil {
				t.Fatal(err)
			}
			defer reg.Close()
			svc := registrytest.ServiceName(t)
			ins := []registry.Instance{
				{Service: svc + "-a", Addr: "127.0.0.1:20001", Weight: 3},
				{Service: svc + "-a", Addr: "127.0.0.1:20002", State: registry.Draining},
				{Service: svc + "-b", Addr: "127.0.0.1:20003"},
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			for _, in := range ins {
				if err := reg.Register(ctx, in); err != nil {
					t.Fatal(err)
				}
				defer reg.Deregister(context.Background(), in)
			}
			want := fmt.Sprintf("%s-a\n  127.0.0.1:20001          weight 3  active\n  127.0.0.1:20002          weight 1  draining\n%s-b\n  127.0.0.1:20003          weight 1  active\n", svc, svc)
			var out, errs string
			var status int
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
				out, errs, status = run(t, "", newListCmd, url)
				if status == 0 && strings.Contains(out, want) || time.Now().After(deadline) {
					break
				}
			}
			if status != 0 || !strings.Contains(out, want) {
				t.Fatalf("fleet list %s: status %d, stderr %q\nstdout:\n%s\nwant it to hold:\n%s", url, status, errs, out, want)
			}
			out, errs, status = run(t, "", newListCmd, "--json", url)
			var got []registryServices
			if status != 0 || json.Unmarshal([]byte(out), &got) != nil {
				t.Fatalf("fleet list --json %s: status %d, stderr %q, stdout %q", url, status, errs, out)
			}
			found := 0
			for _, s := range got {
				switch s.Service {
				case svc + "-a":
					found++
					if len(s.Instances) != 2 || s.Instances[0].Weight != 3 || s.Instances[1].State != registry.Draining {
						t.Errorf("--json: %s: %+v", s.Service, s.Instances)
					}
				case svc + "-b":
					found++
					if len(s.Instances) != 1 || s.Instances[0].Addr != "127.0.0.1:20003" {
						t.Errorf("--json: %s: %+v", s.Service, s.Instances)
					}
				}
			}
			if found != 2 {
				t.Errorf("--json lists %d of the 2 services:\n%s", found, out)
			}
		})
	}
}

// TestListStatic lists a static list of two servers: every service each
// serves, with both addresses.
func TestListStatic(t *testing.T) {
	a, b := startServer(t), startServer(t)
	out, errs, status := run(t, "", newListCmd, "static://"+a+","+b)
	first, second := a, b
	if second < first {
		first, second = second, first
	}
	want := fmt.Sprintf("Arith\n  %-24s weight 1  active\n  %-24s weight 1  active\nHello\n", first, second)
	if status != 0 || !strings.Contains(out, want) {
		t.Fatalf("status %d, stderr %q\nstdout:\n%s\nwant it to hold:\n%s", status, errs, out, want)
	}
}

// TestListRegistryErrors: an unknown scheme is a usage error; a registry
// that does not answer is unavailable (or deadline_exceeded when the
// command's --timeout ends the wait).
func TestListRegistryErrors(t *testing.T) {
	_, errs, status := run(t, "", newListCmd, "consul://127.0.0.1:8500")
	if status != exitUsage || !strings.Contains(errs, `unknown scheme "consul"`) {
		t.Fatalf("unknown scheme: status %d, stderr %q", status, errs)
	}
	_, errs, status = run(t, "", newListCmd, "--timeout", "2s", "etcd://127.0.0.1:1")
	if status != exitCodeShift+14 && status != exitCodeShift+4 || !strings.Contains(errs, "registry 127.0.0.1:1") {
		t.Fatalf("registry down: status %d, stderr %q", status, errs)
	}
}
