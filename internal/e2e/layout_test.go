package e2e

import (
	"os/exec"
	"strings"
	"testing"
)

// TestCoreDependencies enforces DESIGN.md's layout rule: the core packages
// import no registry backend, gRPC, Thrift or observability library.
func TestCoreDependencies(t *testing.T) {
	core := []string{"fleet", "protocol", "codec", "compress", "server", "client", "selector", "registry"}
	banned := []string{"google.golang.org/grpc", "github.com/apache/thrift", "go.etcd.io/", "github.com/go-zookeeper/",
		"github.com/redis/", "github.com/nats-io/", "github.com/hashicorp/mdns", "github.com/prometheus/", "go.opentelemetry.io/",
		"github.com/fleetrpc/fleet/registry/"}
	for _, p := range core {
		pkg := "github.com/fleetrpc/fleet/" + p
		if p == "fleet" {
			pkg = "github.com/fleetrpc/fleet"
		}
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, b := range banned {
				if strings.HasPrefix(dep, b) {
					t.Errorf("%s depends on %s", pkg, dep)
				}
			}
		}
	}
}
