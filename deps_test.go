package fleet_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// banned lists module path prefixes the core module must never require:
// registry clients, gRPC, Thrift, HTTP/2 frameworks, observability, CLI and
// plotting libraries live in their own modules (see DESIGN.md).
var banned = []string{
	"google.golang.org/grpc", "github.com/apache/thrift", "go.etcd.io/",
	"github.com/go-zookeeper/", "github.com/redis/", "github.com/nats-io/",
	"github.com/hashicorp/", "github.com/miekg/dns", "github.com/prometheus/",
	"go.opentelemetry.io/", "github.com/spf13/", "gonum.org/", "github.com/smallnest/",
	"github.com/xtaci/", "github.com/quic-go/", "connectrpc.com/", "github.com/soheilhy/cmux",
	"go.uber.org/zap",
}

func isBanned(path string) bool {
	for _, b := range banned {
		if strings.HasPrefix(path, b) {
			return true
		}
	}
	return false
}

// TestConsumerModuleGraph builds a throwaway module that requires the core
// module (through a replace to this checkout) and imports its public
// packages, then checks the consumer's whole module graph (go list -m all):
// what a user of `client` and `server` downloads.
func TestConsumerModuleGraph(t *testing.T) {
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gomod := "module example.com/consumer\n\ngo 1.26\n\nrequire github.com/fleetrpc/fleet v0.0.0-00010101000000-000000000000\n\nreplace github.com/fleetrpc/fleet => " + root + "\n"
	main := `package main

import (
	_ "github.com/fleetrpc/fleet"
	_ "github.com/fleetrpc/fleet/client"
	_ "github.com/fleetrpc/fleet/codec"
	_ "github.com/fleetrpc/fleet/compress"
	_ "github.com/fleetrpc/fleet/protocol"
	_ "github.com/fleetrpc/fleet/registry"
	_ "github.com/fleetrpc/fleet/registry/static"
	_ "github.com/fleetrpc/fleet/selector"
	_ "github.com/fleetrpc/fleet/server"
)

func main() {}
`
	for name, body := range map[string]string{"go.mod": gomod, "main.go": main} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) string {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	// Copy the core's checksums so resolving needs no network beyond the
	// module cache.
	if sum, err := os.ReadFile(filepath.Join(root, "go.sum")); err == nil {
		if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run("mod", "tidy")
	mods := strings.Fields(run("list", "-m", "-f", "{{.Path}}", "all"))
	t.Logf("consumer module graph: %d modules", len(mods))
	for _, m := range mods {
		if isBanned(m) {
			t.Errorf("a consumer of the core module requires %s", m)
		}
	}
	if len(mods) > 25 {
		t.Errorf("consumer module graph has %d modules, want at most 25:\n%s", len(mods), strings.Join(mods, "\n"))
	}
}

// TestCorePackageImports checks the packages the core module builds: none
// imports a banned library or one of Fleet's own heavy modules.
func TestCorePackageImports(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "-test", "./...")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	own := []string{"github.com/fleetrpc/fleet/bench", "github.com/fleetrpc/fleet/cmd/",
		"github.com/fleetrpc/fleet/registry/etcd", "github.com/fleetrpc/fleet/registry/zookeeper",
		"github.com/fleetrpc/fleet/registry/redis", "github.com/fleetrpc/fleet/registry/nats",
		"github.com/fleetrpc/fleet/registry/mdns", "github.com/fleetrpc/fleet/gateway",
		"github.com/fleetrpc/fleet/observability/", "github.com/fleetrpc/fleet/transport/kcp",
		"github.com/fleetrpc/fleet/transport/quic"}
	for _, dep := range strings.Fields(string(out)) {
		if isBanned(dep) {
			t.Errorf("the core module imports %s", dep)
		}
		for _, o := range own {
			if strings.HasPrefix(dep, o) {
				t.Errorf("the core module imports %s, which lives in its own module", dep)
			}
		}
	}
}
