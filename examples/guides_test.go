package examples_test

import (
	"context"
	"encoding/json"
	"fmt"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// goBlock is a Go code block of a Markdown file.
var goBlock = regexp.MustCompile("(?s)```go\n(.*?)```\n")

// TestGuidePrograms builds every Go block of docs/*.md that is a whole
// program (it starts with "package main") inside this module, so the
// guides' complete examples compile against the current API, and checks
// that they are gofmt'ed. The blocks are
// laid over the module with go build -overlay; nothing is written to the
// source tree.
func TestGuidePrograms(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	overlay := map[string]string{}
	var pkgs, names []string
	for _, f := range files {
		md, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range goBlock.FindAllStringSubmatch(string(md), -1) {
			if !strings.HasPrefix(m[1], "package main\n") {
				continue
			}
			if formatted, err := format.Source([]byte(m[1])); err != nil || string(formatted) != m[1] {
				t.Errorf("%s block %d is not gofmt'ed (%v)", filepath.Base(f), i+1, err)
			}
			name := fmt.Sprintf("%s-%d", strings.TrimSuffix(filepath.Base(f), ".md"), i)
			src := filepath.Join(tmp, name+".go")
			if err := os.WriteFile(src, []byte(m[1]), 0o644); err != nil {
				t.Fatal(err)
			}
			overlay[filepath.Join(wd, "guidecheck", name, "main.go")] = src
			pkgs = append(pkgs, "./guidecheck/"+name)
			names = append(names, filepath.Base(f)+" block "+fmt.Sprint(i+1))
		}
	}
	if len(pkgs) == 0 {
		t.Fatal("no complete program in docs/*.md")
	}
	js, err := json.Marshal(map[string]any{"Replace": overlay})
	if err != nil {
		t.Fatal(err)
	}
	ov := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(ov, js, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for i, p := range pkgs {
		out, err := exec.CommandContext(ctx, "go", "build", "-overlay", ov, "-o", filepath.Join(tmp, "bin", filepath.Base(p)), p).CombinedOutput()
		if err != nil {
			t.Errorf("%s does not build: %v\n%s", names[i], err, out)
		}
	}
}
