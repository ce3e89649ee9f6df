package examples_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	mdLink    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdHeading = regexp.MustCompile(`(?m)^#+ (.+)$`)
	mdFence   = regexp.MustCompile("(?s)```.*?```")
	notSlug   = regexp.MustCompile(`[^\p{L}\p{N}_\- ]`)
)

// slug is the anchor GitHub gives a heading: lower case, punctuation
// dropped, spaces as hyphens.
func slug(h string) string {
	return strings.ReplaceAll(notSlug.ReplaceAllString(strings.ToLower(strings.TrimSpace(h)), ""), " ", "-")
}

// TestDocsLinks checks that every relative link of README.md and docs/
// names a file that exists and, with a #fragment into a Markdown file, a
// heading of it; and that docs/README.md, the index, links every guide.
func TestDocsLinks(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	perf, _ := filepath.Glob(filepath.Join("..", "docs", "perf", "*.md"))
	files = append(append(files, perf...), filepath.Join("..", "README.md"))
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		a := map[string]bool{}
		for _, m := range mdHeading.FindAllStringSubmatch(mdFence.ReplaceAllString(string(b), ""), -1) {
			a[slug(m[1])] = true
		}
		anchors[path] = a
		return a
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(mdFence.ReplaceAllString(string(b), ""), -1) {
			link := m[1]
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			path, frag, _ := strings.Cut(link, "#")
			target := f
			if path != "" {
				target = filepath.Join(filepath.Dir(f), filepath.FromSlash(path))
			}
			if _, err := os.Stat(target); err != nil {
				t.Errorf("%s links %s: no such file", f, link)
				continue
			}
			if frag != "" && strings.HasSuffix(target, ".md") && !anchorsOf(target)[frag] {
				t.Errorf("%s links %s: no such heading", f, link)
			}
		}
	}
	index, err := os.ReadFile(filepath.Join("..", "docs", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		if filepath.Dir(f) != filepath.Join("..", "docs") || name == "README.md" {
			continue
		}
		if !strings.Contains(string(index), "]("+name+")") {
			t.Errorf("docs/README.md does not link %s", name)
		}
	}
}
