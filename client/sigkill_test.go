package client_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/internal/testutil"
	"github.com/fleetrpc/fleet/server"
)

// childServerEnv, when set to a handler hold time (a time.Duration), makes
// the test binary serve Echo.Do on a loopback port instead of running the
// tests: it prints the address on stdout and serves until killed or until
// its stdin closes (the parent test is gone).
const childServerEnv = "FLEET_TEST_CHILD_SERVER"

func runChildServer() {
	hold, err := time.ParseDuration(os.Getenv(childServerEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child server:", err)
		os.Exit(2)
	}
	go func() { // exit with the parent
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	srv := server.New()
	srv.RegisterFunction("Echo", "Do", func(ctx context.Context, in *Req, out *Rep) error {
		select {
		case <-time.After(hold):
		case <-ctx.Done():
		}
		return nil
	})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "child server:", err)
		os.Exit(2)
	}
	fmt.Println(lis.Addr().String())
	srv.Serve(lis)
	os.Exit(0)
}

// startChild starts a server process and returns it and its address; it
// is killed when the test ends.
func startChild(t *testing.T, hold time.Duration) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childServerEnv+"="+hold.String())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("child server: %v", err)
	}
	return cmd, strings.TrimSpace(line)
}

// TestSigkillFailover: three server processes; one is killed with SIGKILL
// under load: every idempotent call still succeeds, since the calls that
// were on the killed process fail over to the two others, outside the
// retry budget (client/failover.go), and the killed process is marked down
// (not tripped) for later calls.
func TestSigkillFailover(t *testing.T) {
	for _, tc := range []struct {
		callers int
		hold    time.Duration
		after   int64 // calls to complete after the kill
	}{
		{200, time.Second, 200},
		{1000, 5 * time.Millisecond, 10000},
	} {
		t.Run(fmt.Sprintf("callers=%d/hold=%v", tc.callers, tc.hold), func(t *testing.T) {
			for run := range 2 {
				var cmds [3]*exec.Cmd
				var addrs [3]string
				for i := range cmds {
					cmds[i], addrs[i] = startChild(t, tc.hold)
				}
				tab, err := newTableAddrs(addrs[:]...)
				if err != nil {
					t.Fatal(err)
				}
				x := newX(t, tab, client.WithIdempotent("Do"))
				load := testutil.StartLoad(tc.callers, 0, func(int) error {
					ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
					defer cancel()
					return x.Call(ctx, "Do", &Req{}, &Rep{})
				})
				waitFor(t, func() bool { return load.OK() >= int64(tc.callers) })
				if err := cmds[run%3].Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				killedAt := load.OK()
				waitFor(t, func() bool { return load.OK() >= killedAt+tc.after })
				ok, failed, first := load.Stop()
				x.Close()
				if failed != 0 {
					t.Fatalf("run %d: %d of %d calls failed; first: %v", run, failed, ok+failed, first)
				}
				t.Logf("run %d: %d calls, none failed", run, ok)
			}
		})
	}
}
