package main

import (
	"bufio"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// childEnv makes the test binary run the fleet command line (os.Args[1:])
// instead of the tests, so that a test can start `fleet ...` as a child
// process without building the binary first.
const childEnv = "FLEET_TEST_RUN_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestDashboardDefaultRegistry: without --registry, fleet dashboard looks
// where fleet demo --serve listens its embedded etcd by default.
func TestDashboardDefaultRegistry(t *testing.T) {
	dash := newDashboardCmd().Flags().Lookup("registry")
	var demoCmd = rootCmd
	for _, c := range rootCmd.Commands() {
		if c.Name() == "demo" {
			demoCmd = c
		}
	}
	addr := demoCmd.Flags().Lookup("registry-addr")
	if dash == nil || addr == nil {
		t.Fatal("dashboard --registry or demo --registry-addr is missing")
	}
	if dash.DefValue != "etcd://"+addr.DefValue || addr.DefValue != defaultRegistryAddr {
		t.Fatalf("dashboard --registry defaults to %q, demo --registry-addr to %q", dash.DefValue, addr.DefValue)
	}
}

// TestDashboardAgainstDemoServe starts `fleet demo --serve --load 50` as a
// child process (its embedded etcd on a random port, read from what it
// prints), points a dashboard at the registry URL it printed, waits for
// the three instances of Arith and Hello with load (calls/s and p99)
// reported, steers one instance's weight through the page's API (the
// demo's servers serve fleet.Admin), and stops the child with SIGTERM, by PID: it shuts down
// cleanly (exit status 0).
func TestDashboardAgainstDemoServe(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "demo", "--serve", "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0",
		"--registry-addr", "127.0.0.1:0", "--load", "50")
	// The demo's admin token, for the child and this process's
	// dashboard; the token file goes to a directory of the test's own.
	t.Setenv(tokenEnv, "test-admin-token")
	cmd.Env = append(os.Environ(), childEnv+"=1", "XDG_CONFIG_HOME="+t.TempDir())
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default: // nobody reads any more
			}
		}
		close(lines)
		exited <- cmd.Wait() // after the pipe is drained, as Wait requires
	}()
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			return err
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-exited
			return errors.New("demo --serve did not stop within 20 s of SIGTERM")
		}
	}
	defer stop()

	var registryURL string
	deadline := time.After(30 * time.Second)
	for registryURL == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("demo --serve exited before printing its registry")
			}
			if rest, ok := strings.CutPrefix(l, "registry: "); ok {
				registryURL, _, _ = strings.Cut(rest, " ")
			}
		case <-deadline:
			t.Fatal("demo --serve printed no registry line within 30 s")
		}
	}
	if !strings.HasPrefix(registryURL, "etcd://127.0.0.1:") {
		t.Fatalf("demo --serve prints registry %q", registryURL)
	}

	d := newTestDashboard(t, &dashboardFlags{registry: registryURL})
	hs := httptest.NewServer(d.handler())
	defer hs.Close()
	waitInstances(t, hs.URL, 3)
	// The load (calls/s and p99) reaches the registry every second, and
	// the page's API.
	var s apiServices
	for end := time.Now().Add(20 * time.Second); ; {
		getJSON(t, http.DefaultClient, hs.URL+"/api/services", &s)
		if busy(s, "Arith") {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("no Arith instance reports calls/s within 20 s: %+v", s)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Steering works against the demo's servers.
	var victim apiInstance
	for _, svc := range s.Services {
		if svc.Name == "Arith" {
			victim = svc.Instances[0]
		}
	}
	body := `{"service":"Arith","addr":"` + victim.Addr + `","weight":7}`
	resp, err := http.Post(hs.URL+"/api/steer", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("steer %s: status %d", body, resp.StatusCode)
	}
	for end := time.Now().Add(20 * time.Second); weightOf(s, "Arith", victim.Addr) != 7; {
		if time.Now().After(end) {
			t.Fatalf("the weight of %s never became 7: %+v", victim.Addr, s)
		}
		time.Sleep(50 * time.Millisecond)
		getJSON(t, http.DefaultClient, hs.URL+"/api/services", &s)
	}

	if err := stop(); err != nil {
		t.Fatalf("demo --serve after SIGTERM: %v", err)
	}
}

// busy reports whether an instance of svc reports calls/s and a p99.
func busy(s apiServices, svc string) bool {
	for _, sv := range s.Services {
		for _, in := range sv.Instances {
			if sv.Name == svc && in.CallsPerSecond > 0 && in.P99Ms > 0 {
				return true
			}
		}
	}
	return false
}

func weightOf(s apiServices, svc, addr string) int {
	for _, sv := range s.Services {
		for _, in := range sv.Instances {
			if sv.Name == svc && in.Addr == addr {
				return in.Weight
			}
		}
	}
	return 0
}
