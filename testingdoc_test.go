package fleet_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestTestingGuideCompiles builds and runs the complete example of
// docs/testing.md, the Go blocks that start with a package clause (the
// service "greeter" and its tests), as a module of its own that requires
// this checkout: the guide's code compiles, passes go vet, and its tests
// pass.
func TestTestingGuideCompiles(t *testing.T) {
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "testing.md"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := map[string]string{
		"go.mod": "module example.com/greeter\n\ngo 1.26\n\nrequire github.com/fleetrpc/fleet v0.0.0-00010101000000-000000000000\n\nreplace github.com/fleetrpc/fleet => " + root + "\n",
	}
	for _, block := range strings.Split(string(doc), "```go\n")[1:] {
		code, _, _ := strings.Cut(block, "```")
		// A complete file: comments, then its package clause.
		pkg := ""
		for _, line := range strings.Split(code, "\n") {
			if p, ok := strings.CutPrefix(line, "package "); ok {
				pkg = p
			}
			if !strings.HasPrefix(line, "//") {
				break
			}
		}
		if pkg == "" {
			continue
		}
		files[pkg+".go"] = code
	}
	if files["greeter.go"] == "" || files["greeter_test.go"] == "" {
		t.Fatalf("docs/testing.md: found %d files, want the greeter package and its test (greeter.go, greeter_test.go)", len(files)-1)
	}
	if sum, err := os.ReadFile(filepath.Join(root, "go.sum")); err == nil {
		files["go.sum"] = string(sum)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"mod", "tidy"}, {"vet", "./..."}, {"test", "-count=1", "./..."}} {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
