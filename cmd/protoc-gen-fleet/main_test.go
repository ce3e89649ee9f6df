package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"
)

// update rewrites the golden files from protoc's output:
//
//	go test -run TestGoldenProtoc -update .
var update = flag.Bool("update", false, "rewrite testdata/golden/*.golden from protoc's output")

// goldenProtos are the files of testdata/golden given to protoc and buf.
var goldenProtos = []string{"common.proto", "kinds.proto", "nosvc.proto"}

// tool returns the path of an external program a test needs: under CI
// (CI=true, where .ci/setup.d/70-protogen.sh installs it) its absence
// fails the test, elsewhere it skips it.
func tool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s not found (CI installs it with .ci/setup.d/70-protogen.sh): %v", name, err)
		}
		t.Skipf("%s not installed (bash .ci/services.sh installs it)", name)
	}
	return p
}

// plugins builds protoc-gen-go (at the version go.mod requires) and
// protoc-gen-fleet into a temporary directory and returns their paths.
func plugins(t *testing.T) (goPlugin, fleetPlugin string) {
	t.Helper()
	dir := t.TempDir()
	goPlugin, fleetPlugin = filepath.Join(dir, "protoc-gen-go"), filepath.Join(dir, "protoc-gen-fleet")
	for _, b := range [][]string{
		{"build", "-o", goPlugin, "google.golang.org/protobuf/cmd/protoc-gen-go"},
		{"build", "-o", fleetPlugin, "."},
	} {
		if out, err := exec.Command("go", b...).CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(b, " "), err, out)
		}
	}
	return goPlugin, fleetPlugin
}

// generated returns the files under dir by their path relative to dir.
func generated(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// checkGolden compares the *_fleet.pb.go files of out with
// testdata/golden/NAME.golden, and checks that the files without a service
// got none.
func checkGolden(t *testing.T, out map[string][]byte) {
	t.Helper()
	var fleetFiles []string
	for name := range out {
		if strings.HasSuffix(name, "_fleet.pb.go") {
			fleetFiles = append(fleetFiles, name)
		}
	}
	sort.Strings(fleetFiles)
	if want := []string{"kinds_fleet.pb.go"}; fmt.Sprint(fleetFiles) != fmt.Sprint(want) {
		t.Fatalf("generated Fleet files %v, want %v (none for files without a service)", fleetFiles, want)
	}
	for _, name := range fleetFiles {
		golden := filepath.Join("testdata", "golden", name+".golden")
		if *update {
			if err := os.WriteFile(golden, out[name], 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (run go test -run TestGoldenProtoc -update . to write it)", err)
		}
		if !bytes.Equal(out[name], want) {
			t.Errorf("%s differs from %s (run go test -run TestGoldenProtoc -update . after a deliberate change)\n%s",
				name, golden, firstDiff(string(want), string(out[name])))
		}
	}
}

// firstDiff describes the first line where got differs from want.
func firstDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(wl), len(gl)); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return fmt.Sprintf("line %d:\n  want %q\n  got  %q", i+1, w, g)
		}
	}
	return "same lines"
}

// compiles writes the generated files into a module that requires this
// repository's core (replace ../..), vets it, and runs
// testdata/golden/kinds_e2e_test.go.src there with -race: the generated
// code compiles against the server and client APIs it names, and every
// RPC kind works through the generated registration and clients over
// TCP, in process and through an XClient.
func compiles(t *testing.T, out map[string][]byte) {
	t.Helper()
	_, self, _, _ := runtime.Caller(0)
	root := filepath.Clean(filepath.Join(filepath.Dir(self), "..", ".."))
	dir := t.TempDir()
	// protoc-gen-go puts kinds.pb.go and common.pb.go in the package of
	// their go_package; lay them out as the import paths say.
	layout := map[string]string{"common.pb.go": "commonpb", "kinds.pb.go": "kindspb", "kinds_fleet.pb.go": "kindspb", "nosvc.pb.go": "kindspb"}
	for name, b := range out {
		sub, ok := layout[name]
		if !ok {
			t.Fatalf("unexpected generated file %s", name)
		}
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, sub, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gomod := fmt.Sprintf(`module example.com/golden

go 1.26.8

require (
	github.com/fleetrpc/fleet v0.0.0-00010101000000-000000000000
	google.golang.org/protobuf v1.36.12
)

replace github.com/fleetrpc/fleet => %s
`, root)
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"go.mod": []byte(gomod), "go.sum": sum} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e2e, err := os.ReadFile(filepath.Join("testdata", "golden", "kinds_e2e_test.go.src"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kindspb", "kinds_e2e_test.go"), e2e, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"vet", "./..."}, {"test", "-race", "-count=1", "./..."}} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		b, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("go %s on the generated code: %v\n%s", strings.Join(args, " "), err, b)
		}
	}
}

// TestGoldenProtoc runs protoc with protoc-gen-go and protoc-gen-fleet on
// testdata/golden and compares the output with the golden files; the
// output compiles and vets against the core module.
func TestGoldenProtoc(t *testing.T) {
	protoc := tool(t, "protoc")
	goPlugin, fleetPlugin := plugins(t)
	out := t.TempDir()
	args := append([]string{
		"--plugin=protoc-gen-go=" + goPlugin, "--plugin=protoc-gen-fleet=" + fleetPlugin,
		"-I", filepath.Join("testdata", "golden"),
		"--go_out=" + out, "--go_opt=paths=source_relative",
		"--fleet_out=" + out, "--fleet_opt=paths=source_relative",
	}, goldenProtos...)
	if b, err := exec.Command(protoc, args...).CombinedOutput(); err != nil {
		t.Fatalf("protoc: %v\n%s", err, b)
	}
	files := generated(t, out)
	checkGolden(t, files)
	compiles(t, files)
}

// TestGoldenBuf runs the same generation under buf generate (local
// plugins named in a buf.gen.yaml) and compares with the same golden
// files.
func TestGoldenBuf(t *testing.T) {
	buf := tool(t, "buf")
	goPlugin, fleetPlugin := plugins(t)
	tmp := t.TempDir()
	out := filepath.Join(tmp, "out")
	tmpl := filepath.Join(tmp, "buf.gen.yaml")
	yaml := fmt.Sprintf(`version: v2
plugins:
  - local: %s
    out: %s
    opt: paths=source_relative
  - local: %s
    out: %s
    opt: paths=source_relative
`, goPlugin, out, fleetPlugin, out)
	if err := os.WriteFile(tmpl, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(buf, "generate", filepath.Join("testdata", "golden"), "--template", tmpl)
	cmd.Env = append(os.Environ(), "BUF_CACHE_DIR="+filepath.Join(tmp, "cache"))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("buf generate: %v\n%s", err, b)
	}
	if *update {
		t.Skip("-update writes the golden files from protoc's output only")
	}
	checkGolden(t, generated(t, out))
}

// TestVersion checks --version.
func TestVersion(t *testing.T) {
	_, fleetPlugin := plugins(t)
	b, err := exec.Command(fleetPlugin, "--version").Output()
	if err != nil || string(b) != "protoc-gen-fleet "+version+"\n" {
		t.Fatalf("--version: %q, %v", b, err)
	}
}
