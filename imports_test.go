package fleet_test

import (
	"os/exec"
	"strings"
	"testing"
)

// importRules states, for each core package, the Fleet packages it must
// not import (directly); each package's doc.go says the same in words.
// Test files are not checked. Paths are relative to the module path.
var importRules = []struct {
	pkg       string
	forbidden []string // "*" forbids every Fleet package not listed in allowed
	allowed   []string
}{
	{pkg: "", forbidden: []string{"*"}, allowed: []string{"internal/ctxkey"}},
	{pkg: "internal/ctxkey", forbidden: []string{"*"}},
	{pkg: "internal/bufpool", forbidden: []string{"*"}},
	{pkg: "codec", forbidden: []string{"*"}},
	{pkg: "compress", forbidden: []string{"*"}},
	{pkg: "registry", forbidden: []string{"*"}},
	{pkg: "protocol", forbidden: []string{"*"}, allowed: []string{"", "codec", "compress", "internal/bufpool"}},
	{pkg: "selector", forbidden: []string{"*"}, allowed: []string{"", "registry"}},
	{pkg: "internal/transport", forbidden: []string{"*"}},
	{pkg: "internal/memconn", forbidden: []string{"*"}},
	{pkg: "server", forbidden: []string{"client", "selector", "registry/static"}},
	// The built-in services reach the server only through its public API.
	{pkg: "server/health", forbidden: []string{"*"}, allowed: []string{"", "server"}},
	{pkg: "server/reflection", forbidden: []string{"*"}, allowed: []string{"", "server", "codec"}},
	{pkg: "server/admin", forbidden: []string{"*"}, allowed: []string{"", "server", "registry"}},
	{pkg: "client", forbidden: []string{"server", "registry/static"}},
	{pkg: "registry/static", forbidden: []string{"client", "server", "protocol", "selector"}},
}

const modPath = "github.com/fleetrpc/fleet"

// TestPackageImports checks importRules against `go list` of the core
// module.
func TestPackageImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	imports := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		var own []string
		for _, imp := range f[1:] {
			if imp == modPath || strings.HasPrefix(imp, modPath+"/") {
				own = append(own, strings.TrimPrefix(strings.TrimPrefix(imp, modPath), "/"))
			}
		}
		imports[strings.TrimPrefix(strings.TrimPrefix(f[0], modPath), "/")] = own
	}
	for _, r := range importRules {
		got, ok := imports[r.pkg]
		if !ok {
			t.Errorf("package %q not found in the module", r.pkg)
			continue
		}
		for _, imp := range got {
			bad := false
			for _, f := range r.forbidden {
				if f == imp || (f == "*" && !contains(r.allowed, imp)) {
					bad = true
				}
			}
			if bad {
				t.Errorf("package %q imports %q, which its doc.go forbids", "fleet/"+r.pkg, "fleet/"+imp)
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
