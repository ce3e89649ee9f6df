package conformance_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fleetrpc/fleet/conformance"
	"go.uber.org/goleak"
)

// serveEnv, when set, makes the test binary the server under test: the
// runner starts it (os.Args[0]) with this variable in its environment.
const serveEnv = "FLEET_CONFORMANCE_SERVE"

func TestMain(m *testing.M) {
	if os.Getenv(serveEnv) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		if err := conformance.ServeCompat(ctx, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "fleet conformance server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// TestConformance runs the Connect conformance suite's server tests
// (connectrpc.com/conformance v1.0.7) against a Fleet server behind the
// gateway: config.yaml says what it serves, known-failing.txt lists the
// cases that cannot pass and why, known-flaky.txt those that pass or fail
// from run to run. The runner fails the test for any other failure, and
// for a known failure that passes. It prints the count of cases, passing
// and known-failing, per protocol and HTTP version.
func TestConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("the conformance suite takes minutes")
	}
	dir := t.TempDir()
	runner := filepath.Join(dir, "connectconformance")
	build := exec.Command("go", "build", "-o", runner, "connectrpc.com/conformance/cmd/connectconformance")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the runner: %v\n%s", err, out)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// Bounded parallelism: CI machines are small.
	cmd := exec.CommandContext(ctx, runner, "--mode", "server", "--conf", "config.yaml",
		"--known-failing", "@known-failing.txt", "--known-flaky", "@known-flaky.txt", "--parallel", "4", "--max-servers", "2", "-v",
		"--", self)
	cmd.Env = append(os.Environ(), serveEnv+"=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	runErr := cmd.Run()
	ran, passed, known := countCases(out.Bytes())
	keys := slices.Sorted(maps.Keys(ran))
	for _, k := range keys {
		t.Logf("%-17s %4d cases: %4d passed, %3d known failing or flaky", k, ran[k], passed[k], known[k])
	}
	if runErr != nil {
		t.Fatalf("conformance runner: %v\n%s", runErr, tail(out.String(), 200))
	}
	t.Log(lastLines(out.String(), 3))
}

// The runner's lines: one per server configuration it runs ("Running 337
// tests with reference-client for server config #1 {HTTP_VERSION_1,
// PROTOCOL_CONNECT, TLS:false}..."), one per failed case ("FAILED: name:"
// or, known, "INFO: name failed (as expected)").
var (
	runLine   = regexp.MustCompile(`Running (\d+) tests with .* \{HTTP_VERSION_(\d), PROTOCOL_([A-Z_]+),`)
	knownLine = regexp.MustCompile(`^INFO: (.*) failed \(as expected\)`)
	failLine  = regexp.MustCompile(`^FAILED: (.*?)(:$| was expected)`)
)

var protoNames = map[string]string{"CONNECT": "Connect", "GRPC": "gRPC", "GRPC_WEB": "gRPC-Web"}

// caseKey is the protocol and HTTP version of a case, from its name
// ("Suite/HTTPVersion:2/Protocol:PROTOCOL_GRPC/..." or, for suites of one
// protocol, "gRPC-Web Unexpected Requests/HTTPVersion:1/...").
func caseKey(name string) string {
	v := "?"
	if m := regexp.MustCompile(`HTTPVersion:(\d)`).FindStringSubmatch(name); m != nil {
		v = m[1]
	}
	p := ""
	switch m := regexp.MustCompile(`Protocol:PROTOCOL_([A-Z_]+)/`).FindStringSubmatch(name); {
	case m != nil:
		p = protoNames[m[1]]
	case strings.HasPrefix(name, "gRPC-Web "):
		p = "gRPC-Web"
	case strings.HasPrefix(name, "gRPC ") || strings.Contains(name, "(grpc client impl)"):
		p = "gRPC"
	case strings.HasPrefix(name, "Connect "):
		p = "Connect"
	}
	return p + " HTTP/" + v
}

// countCases counts, per protocol and HTTP version, the cases that ran,
// passed and failed as known.
func countCases(out []byte) (ran, passed, known map[string]int) {
	ran, passed, known = map[string]int{}, map[string]int{}, map[string]int{}
	failed := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := runLine.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			ran[protoNames[m[3]]+" HTTP/"+m[2]] += n
			continue
		}
		if m := knownLine.FindStringSubmatch(line); m != nil {
			known[caseKey(m[1])]++
		} else if m := failLine.FindStringSubmatch(line); m != nil {
			failed[caseKey(m[1])]++
		}
	}
	for k, n := range ran {
		passed[k] = n - known[k] - failed[k]
	}
	return ran, passed, known
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func lastLines(s string, n int) string { return tail(strings.TrimSpace(s), n) }
