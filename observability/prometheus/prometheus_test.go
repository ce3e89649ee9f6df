package fleetprom_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/fleetrpc/fleet/client"
	fleetprom "github.com/fleetrpc/fleet/observability/prometheus"
	"github.com/fleetrpc/fleet/server"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// prometheusBin is the Prometheus server the test runs; .ci/setup.d/
// 20-prometheus.sh installs it (Debian package "prometheus").
const prometheusBin = "/usr/bin/prometheus"

// TestRealPrometheusScrape serves a Fleet server's metrics over HTTP, makes
// a known number of native calls, streams and calls through the gateway's
// HTTP/JSON side, runs a real Prometheus server (a child process on
// 127.0.0.1 scraping every 500 ms with native histograms enabled) and
// polls its query API until fleet_server_handled_total for the method
// reaches the count, the handling-time histogram holds as many samples,
// the stream message counts and the gateway calls (route "http") are in.
func TestRealPrometheusScrape(t *testing.T) {
	if _, err := os.Stat(prometheusBin); err != nil {
		t.Fatalf("%s missing (run .ci/services.sh, which sources .ci/setup.d/20-prometheus.sh): %v", prometheusBin, err)
	}
	reg := prometheus.NewRegistry()
	sm := fleetprom.NewServerMetrics()
	cm := fleetprom.NewClientMetrics()
	reg.MustRegister(sm, cm)
	addr := serveGateway(t, server.New(sm.Option()))
	metrics := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(metrics.Close) // after Prometheus stops: cleanups run last first

	c, err := client.Dial(context.Background(), "tcp", addr, cm.Option())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	const calls = 25
	for i := 0; i < calls; i++ {
		var sum int
		if err := c.Call(context.Background(), "Arith", "Add", &Args{A: i, B: i}, &sum); err != nil {
			t.Fatal(err)
		}
	}

	exercise(t, addr)

	api := startPrometheus(t, metrics.Listener.Addr().String())
	queries := map[string]float64{
		`fleet_server_handled_total{service="Arith",method="Add",route="native",code="ok"}`: calls,
		`fleet_client_handled_total{service="Arith",method="Add",code="ok"}`:                calls,
		// With native histograms on, Prometheus stores the native form.
		`histogram_count(fleet_server_handling_seconds{service="Arith",method="Add",route="native"})`: calls,
		`fleet_server_handled_total{service="Arith",method="Add",route="http",code="ok"}`:             httpCalls,
		`fleet_server_msg_received_total{service="Chat",method="Echo",type="bidi_stream"}`:            echoWords,
		`fleet_server_msg_sent_total{service="Chat",method="Echo",type="bidi_stream"}`:                echoWords,
		`fleet_server_msg_sent_total{service="Chat",method="Spell",type="server_stream"}`:             float64(len(spellWord)),
	}
	deadline := time.Now().Add(25 * time.Second)
	for q, want := range queries {
		for {
			got, err := queryScalar(api, q)
			if err == nil && got == want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("Prometheus query %s: got %v (err %v), want %v", q, got, err, want)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// startPrometheus runs Prometheus on a free loopback port with a config
// scraping target, waits until it is ready, and stops it (by PID) when the
// test ends. It returns the base URL of its HTTP API.
func startPrometheus(t *testing.T, target string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	conf := fmt.Sprintf(`global:
  scrape_interval: 500ms
  scrape_timeout: 400ms
scrape_configs:
  - job_name: fleet
    static_configs:
      - targets: [%q]
`, target)
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	// The port is picked by the kernel and then handed to Prometheus; if
	// another process takes it in between, Prometheus exits and we retry.
	for try := 0; try < 3; try++ {
		port := freePort(t)
		listen := "127.0.0.1:" + strconv.Itoa(port)
		cmd := exec.Command(prometheusBin,
			"--config.file="+cfg,
			"--storage.tsdb.path="+filepath.Join(dir, fmt.Sprintf("data%d", try)),
			"--web.listen-address="+listen,
			"--enable-feature=native-histograms",
			"--log.level=warn",
		)
		logf, err := os.Create(filepath.Join(dir, fmt.Sprintf("prometheus%d.log", try)))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			logf.Close()
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() {
			_ = cmd.Wait()
			close(exited)
		}()
		stop := func() {
			_ = cmd.Process.Kill()
			<-exited
			logf.Close()
		}
		base := "http://" + listen
		if waitReady(base, exited, 20*time.Second) {
			t.Cleanup(stop)
			return base
		}
		stop()
		out, _ := os.ReadFile(logf.Name())
		t.Logf("prometheus on %s did not become ready (try %d); log:\n%s", listen, try, out)
	}
	t.Fatal("prometheus did not start")
	return ""
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitReady polls Prometheus's readiness endpoint until it answers 200,
// the process exits, or d passes.
func waitReady(base string, exited <-chan struct{}, d time.Duration) bool {
	hc := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return false
		default:
		}
		if resp, err := hc.Get(base + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// queryScalar runs an instant query and returns the value of its single
// series; an error when there is not exactly one.
func queryScalar(base, q string) (float64, error) {
	hc := &http.Client{Timeout: 2 * time.Second}
	resp, err := hc.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return 0, err
	}
	if body.Status != "success" {
		return 0, fmt.Errorf("query failed: %s", body.Error)
	}
	if len(body.Data.Result) != 1 {
		return 0, fmt.Errorf("%d series", len(body.Data.Result))
	}
	s, _ := body.Data.Result[0].Value[1].(string)
	return strconv.ParseFloat(s, 64)
}
