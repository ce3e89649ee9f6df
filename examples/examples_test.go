package examples_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

// program is an example and the output it must print, line by line.
type program struct {
	dir  string
	want []string
}

// programs lists every example.
var programs = []program{
	{"hello", []string{
		"Arith.Add 1 + 2 = 3",
		"Arith.Mul 3 * 4 = 12",
		"Log.Write got: hello, Fleet",
	}},
	{"typed", []string{
		"17 / 5 = 3 remainder 2",
		"Neg 7 = -7",
		`1 / 0: code invalid_argument, message "divide by zero"`,
		"Math.Sqrt: not_found",
	}},
	{"streams", []string{
		"Count: 1", "Count: 2", "Count: 3",
		"Upper: FLEET", "Upper: STREAMS", "Upper: done",
	}},
	{"authtls", []string{
		"with the token: hello, Ada",
		"with a wrong token: unauthenticated",
		"through an XClient: hello, Grace",
	}},
	{"failover", []string{
		"3 servers: 30 of 30 calls succeeded",
		"one server killed: 30 of 30 calls succeeded",
		"one more shut down: 30 of 30 calls succeeded",
	}},
	{"gateway", []string{
		"HTTP/JSON: 200 OK 3",
		`JSON-RPC: 200 OK {"jsonrpc":"2.0","result":3,"id":1}`,
		"gRPC: hello, Ada",
		"native: 3",
	}},
	{"protofirst", []string{
		"TCP: hello, Ada",
		"TCP stream: hello #1, Ada",
		"TCP stream: hello #2, Ada",
		"TCP, bad times: invalid_argument",
		"in process: hello, Grace",
		"XClient: hello, Linus",
		"XClient stream: hello #1, Linus",
		"XClient stream: hello #2, Linus",
	}},
	{"observability", []string{
		`level=INFO msg="fleet call" side=server service=Arith method=Add route=native code=ok`,
		"sum: 3",
		"span: Arith/Add server",
		"span: Arith/Add client",
		`metric: fleet_client_handled_total{code="ok",method="Add",service="Arith"} 1`,
		`metric: fleet_server_handled_total{code="ok",method="Add",route="native",service="Arith",type="unary"} 1`,
	}},
	{"inprocess", []string{
		"Hello: hello, Ada (metadata greeted=Ada)",
		"Hello without a name: invalid_argument",
		"without the token: unauthenticated",
		"Repeat: 1: hello, Grace",
		"Repeat: 2: hello, Grace",
		"after Shutdown: unavailable",
	}},
}

// TestPrograms builds every example (with -race when the test runs with
// it) and runs it, each with a time limit, checking its exit status and its
// output.
func TestPrograms(t *testing.T) {
	bin := t.TempDir()
	dirs, err := filepath.Glob("*/main.go")
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) != len(programs) {
		t.Fatalf("%d programs on disk (%v), %d in the table: add the new one to the table", len(dirs), dirs, len(programs))
	}
	args := []string{"build", "-o", bin + string(filepath.Separator)}
	if raceEnabled {
		args = append(args, "-race")
	}
	for _, p := range programs {
		args = append(args, "./"+p.dir)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "go", args...).CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	for _, p := range programs {
		t.Run(p.dir, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			exe := filepath.Join(bin, p.dir)
			if runtime.GOOS == "windows" {
				exe += ".exe"
			}
			cmd := exec.CommandContext(ctx, exe)
			cmd.WaitDelay = time.Second
			out, err := cmd.CombinedOutput()
			if ctx.Err() != nil {
				t.Fatalf("%s did not finish within 30 s; output:\n%s", p.dir, out)
			}
			if err != nil {
				t.Fatalf("%s: %v; output:\n%s", p.dir, err, out)
			}
			got := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
			if strings.Join(got, "\n") != strings.Join(p.want, "\n") {
				t.Errorf("%s printed:\n%s\nwant:\n%s", p.dir, out, strings.Join(p.want, "\n"))
			}
		})
	}
}

// marker names the example a README code block comes from.
var marker = regexp.MustCompile("(?m)^<!-- (examples/[a-z]+/main\\.go) -->\n```go\n((?s:.*?))```\n")

// TestReadmeSnippets checks that every Go code block of README.md is
// marked with the example it comes from and appears verbatim in that file,
// up to indentation: a block cut from inside a function is shown with the
// function's tab removed from each line.
func TestReadmeSnippets(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Count(string(readme), "```go\n")
	ms := marker.FindAllStringSubmatch(string(readme), -1)
	if len(ms) == 0 {
		t.Fatal("README.md has no Go block marked with an example")
	}
	if len(ms) != blocks {
		t.Errorf("README.md has %d Go blocks, %d of them marked <!-- examples/NAME/main.go -->: mark every one", blocks, len(ms))
	}
	for _, m := range ms {
		src, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(m[1])))
		if err != nil {
			t.Errorf("README.md names %s: %v", m[1], err)
			continue
		}
		if !containsIndented(string(src), m[2]) {
			t.Errorf("README.md's block marked %s is not in that file verbatim:\n%s", m[1], m[2])
		}
	}
}

// containsIndented reports whether src contains block with every non-empty
// line indented by the same number of tabs (none to three).
func containsIndented(src, block string) bool {
	lines := strings.Split(block, "\n")
	for depth := 0; depth <= 3; depth++ {
		indented := make([]string, len(lines))
		for i, l := range lines {
			if l != "" {
				l = strings.Repeat("\t", depth) + l
			}
			indented[i] = l
		}
		if strings.Contains(src, strings.Join(indented, "\n")) {
			return true
		}
	}
	return false
}
