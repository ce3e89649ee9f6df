package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/internal/testutil"
	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/registry/static"
	"github.com/fleetrpc/fleet/server"
)

// Req asks the echo server for a reply of Size bytes.
type Req struct {
	Size int
	Data []byte
}

// Rep is the echo server's reply.
type Rep struct {
	From string
	Data []byte
}

// startServer serves the "Echo" service (method Do: reply with in.Size
// bytes) on a loopback port until the test ends and returns its address.
func startServer(t *testing.T, name string) string {
	t.Helper()
	srv := server.New()
	if err := srv.RegisterFunction("Echo", "Do", func(ctx context.Context, in *Req, out *Rep) error {
		out.From = name
		out.Data = make([]byte, in.Size)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return testutil.Serve(t, srv)
}

// apiServer is the toxiproxy server the proxies belong to; it is never
// started as an HTTP server: the tests drive proxies and toxics in-process.
func apiServer() *toxiproxy.ApiServer {
	return toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.New(io.Discard))
}

// startProxy starts a toxiproxy proxy on a loopback port in front of
// upstream; it is stopped (its connections closed) when the test ends.
func startProxy(t *testing.T, upstream string) *toxiproxy.Proxy {
	t.Helper()
	p := toxiproxy.NewProxy(apiServer(), "fleet-"+t.Name(), "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

// addToxic adds a toxic of the given type to stream ("upstream": client to
// server, "downstream": server to client) with the attributes in JSON.
func addToxic(t *testing.T, p *toxiproxy.Proxy, typ, stream, attrs string) {
	t.Helper()
	js := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"toxicity":1,"attributes":%s}`,
		typ+"_"+stream, typ, stream, attrs)
	if _, err := p.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
		t.Fatalf("toxic %s: %v", js, err)
	}
}

// outerBound is how long a call may take past its deadline before the
// test calls it hung: generous, for a loaded 2-core CI machine with -race.
const outerBound = 20 * time.Second

// errHung is boundedCall's result for a call that hung.
var errHung = errors.New("call hung past its deadline")

// boundedCall runs call and marks the test failed (and returns errHung)
// when it does not return within deadline plus outerBound. It may run on
// any goroutine.
func boundedCall(t *testing.T, deadline time.Duration, call func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- call(ctx) }()
	select {
	case err := <-errc:
		return err
	case <-time.After(deadline + outerBound):
		t.Errorf("call hung: no result %v after its %v deadline", outerBound, deadline)
		return errHung
	}
}

// TestToxicsEndByDeadline puts each toxic between one client and one
// server and makes calls with a deadline. Every call returns (none hangs
// past its deadline plus a generous bound) with a code from the toxic's
// expected set; toxics that only slow or fragment the traffic let at
// least one call succeed. After each case the connection, the proxy and
// the server are closed and goleak (TestMain) checks that no goroutine
// is left behind.
func TestToxicsEndByDeadline(t *testing.T) {
	cases := []struct {
		name        string
		typ, stream string
		attrs       string
		size        int           // reply bytes
		deadline    time.Duration // of each call
		codes       []fleet.Code  // allowed results
		wantSomeOK  bool          // at least one call must succeed
	}{
		// 1 s on replies: every call outlives its 300 ms deadline.
		{name: "latency-over-deadline", typ: "latency", stream: "downstream",
			attrs: `{"latency":1000,"jitter":0}`, deadline: 300 * time.Millisecond,
			codes: []fleet.Code{fleet.DeadlineExceeded}},
		// 20 ms: calls are slower but fit a 10 s deadline.
		{name: "latency-under-deadline", typ: "latency", stream: "downstream",
			attrs: `{"latency":20,"jitter":10}`, deadline: 10 * time.Second,
			codes: []fleet.Code{fleet.OK, fleet.DeadlineExceeded}, wantSomeOK: true},
		// 4 KB/s for a 64 KiB reply: cannot arrive in 500 ms.
		{name: "bandwidth", typ: "bandwidth", stream: "downstream",
			attrs: `{"rate":4}`, size: 64 << 10, deadline: 500 * time.Millisecond,
			codes: []fleet.Code{fleet.DeadlineExceeded}},
		// The connection is reset as soon as the request reaches the proxy.
		{name: "reset-peer", typ: "reset_peer", stream: "upstream",
			attrs: `{"timeout":0}`, deadline: 5 * time.Second,
			codes: []fleet.Code{fleet.Unavailable, fleet.DeadlineExceeded}},
		// A black hole: the request is swallowed, the connection stays open.
		{name: "timeout-black-hole", typ: "timeout", stream: "upstream",
			attrs: `{"timeout":0}`, deadline: 500 * time.Millisecond,
			codes: []fleet.Code{fleet.DeadlineExceeded}},
		// Data swallowed, then the connection closed after 100 ms.
		{name: "timeout-then-close", typ: "timeout", stream: "upstream",
			attrs: `{"timeout":100}`, deadline: 5 * time.Second,
			codes: []fleet.Code{fleet.Unavailable, fleet.DeadlineExceeded}},
		// Replies cut into 1-16 byte pieces, 50 µs apart.
		{name: "slicer", typ: "slicer", stream: "downstream",
			attrs: `{"average_size":8,"size_variation":7,"delay":50}`, size: 2048,
			deadline: 10 * time.Second,
			codes:    []fleet.Code{fleet.OK, fleet.DeadlineExceeded}, wantSomeOK: true},
		// Requests cut into 1-16 byte pieces.
		{name: "slicer-upstream", typ: "slicer", stream: "upstream",
			attrs: `{"average_size":8,"size_variation":7,"delay":50}`, size: 16,
			deadline: 10 * time.Second,
			codes:    []fleet.Code{fleet.OK, fleet.DeadlineExceeded}, wantSomeOK: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // the cases mostly wait on timers
			p := startProxy(t, startServer(t, "a"))
			addToxic(t, p, tc.typ, tc.stream, tc.attrs)
			// A new connection per call where the toxic breaks it, so
			// every call meets the toxic on a fresh connection too.
			var c *client.Client
			dial := func(ctx context.Context) (*client.Client, error) {
				if c != nil {
					select {
					case <-c.Done():
						c = nil
					default:
						return c, nil
					}
				}
				var err error
				c, err = client.Dial(ctx, "tcp", p.Listen, client.WithHeartbeat(0))
				return c, err
			}
			defer func() {
				if c != nil {
					c.Close()
				}
			}()
			counts := map[fleet.Code]int{}
			for i := 0; i < 4; i++ {
				err := boundedCall(t, tc.deadline, func(ctx context.Context) error {
					cl, err := dial(ctx)
					if err != nil {
						return err
					}
					var rep Rep
					err = cl.Call(ctx, "Echo", "Do", &Req{Size: tc.size}, &rep)
					if err == nil && len(rep.Data) != tc.size {
						return fmt.Errorf("reply of %d bytes, want %d", len(rep.Data), tc.size)
					}
					return err
				})
				if err == errHung {
					t.FailNow()
				}
				code := fleet.CodeOf(err)
				ok := false
				for _, c := range tc.codes {
					ok = ok || c == code
				}
				if !ok {
					t.Fatalf("call %d: code %v (%v), want one of %v", i, code, err, tc.codes)
				}
				counts[code]++
			}
			if tc.wantSomeOK && counts[fleet.OK] == 0 {
				t.Fatalf("no call succeeded: %v", counts)
			}
			t.Logf("codes: %v", counts)
		})
	}
}

// TestXClientFailsOverToxic: two servers of one service, one behind a
// toxic proxy, the other healthy. Under 8 callers of an idempotent method
// for a fixed number of calls each, every call succeeds: the XClient
// fails over from the broken server to the healthy one, and every reply
// comes from the healthy one (the toxics act on requests, so the broken
// server never runs a call). The black hole is detected by the client's
// heartbeat (1 s), which closes the connection and fails its pending
// calls over; the broken server is then skipped for 5 s (down time).
func TestXClientFailsOverToxic(t *testing.T) {
	cases := []struct{ name, typ, stream, attrs string }{
		{"reset-peer", "reset_peer", "upstream", `{"timeout":0}`},
		{"timeout-black-hole", "timeout", "upstream", `{"timeout":0}`},
		{"timeout-then-close", "timeout", "upstream", `{"timeout":100}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bad := startProxy(t, startServer(t, "bad"))
			good := startServer(t, "good")
			addToxic(t, bad, tc.typ, tc.stream, tc.attrs)

			tab, err := static.NewTable(static.Config{})
			if err != nil {
				t.Fatal(err)
			}
			reg := tab.Registrar()
			for _, addr := range []string{bad.Listen, good} {
				if err := reg.Register(context.Background(), registry.Instance{Service: "Echo", Addr: addr, Weight: 1}); err != nil {
					t.Fatal(err)
				}
			}
			x, err := client.NewXClient("Echo", tab.Discovery(),
				client.WithIdempotent("Do"),
				client.WithDownTime(5*time.Second),
				client.WithClientOptions(client.WithHeartbeat(time.Second)))
			if err != nil {
				t.Fatal(err)
			}
			defer x.Close()

			const callers, calls = 8, 25
			failed, from := callMany(t, x, callers, calls, 8)
			if len(failed) > 0 {
				t.Fatalf("%d of %d calls failed despite a healthy server; first: %v", len(failed), callers*calls, failed[0])
			}
			if from["good"] != callers*calls {
				t.Fatalf("replies by server: %v, want all %d from the healthy one", from, callers*calls)
			}
		})
	}
}

// callMany makes calls idempotent Do calls of size bytes from each of
// callers goroutines through x, each bounded by boundedCall, and returns
// the errors and, per server, the replies that succeeded.
func callMany(t *testing.T, x *client.XClient, callers, calls, size int) (failed []error, from map[string]int) {
	from = map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range calls {
				var rep Rep
				err := boundedCall(t, 20*time.Second, func(ctx context.Context) error {
					return x.Call(ctx, "Do", &Req{Size: size}, &rep)
				})
				mu.Lock()
				if err != nil {
					failed = append(failed, err)
				} else {
					from[rep.From]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return failed, from
}

// picks counts the XClient's choices per server and its backup requests.
type picks struct {
	mu      sync.Mutex
	server  map[string]int
	backups int
}

func (p *picks) OnServers(string, []string) {}
func (p *picks) OnPick(_, server string)    { p.mu.Lock(); p.server[server]++; p.mu.Unlock() }
func (p *picks) OnRetry(_, _ string)        {}
func (p *picks) OnBackup(_, _ string)       { p.mu.Lock(); p.backups++; p.mu.Unlock() }

// TestXClientBacksUpSlowServer: two servers, one behind a toxic that slows
// its replies (latency 3 s, or bandwidth 1 KB/s for a 16 KiB reply), the
// XClient in Failbackup mode with a 50 ms backup delay. Under 4 callers ×
// 10 calls every call succeeds and the healthy server answers: a call
// that went to the slow server first is answered by the backup request.
// (Observed: the slow server is picked about twice, both calls are
// rescued by their backup, then the latency-aware P2C selector avoids it.
// Not asserted: which server P2C picks is random.)
func TestXClientBacksUpSlowServer(t *testing.T) {
	cases := []struct {
		name, typ, attrs string
		size             int
	}{
		{"latency", "latency", `{"latency":3000,"jitter":0}`, 8},
		{"bandwidth", "bandwidth", `{"rate":1}`, 16 << 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			slow := startProxy(t, startServer(t, "slow"))
			good := startServer(t, "good")
			addToxic(t, slow, tc.typ, "downstream", tc.attrs)
			obs := &picks{server: map[string]int{}}
			tab, err := static.NewTable(static.Config{})
			if err != nil {
				t.Fatal(err)
			}
			reg := tab.Registrar()
			for _, addr := range []string{slow.Listen, good} {
				if err := reg.Register(context.Background(), registry.Instance{Service: "Echo", Addr: addr, Weight: 1}); err != nil {
					t.Fatal(err)
				}
			}
			x, err := client.NewXClient("Echo", tab.Discovery(),
				client.WithObserver(obs),
				client.WithFailMode(client.Failbackup),
				client.WithBackupDelay(50*time.Millisecond),
				client.WithIdempotent("Do"))
			if err != nil {
				t.Fatal(err)
			}
			defer x.Close()

			const callers, calls = 4, 10
			failed, from := callMany(t, x, callers, calls, tc.size)
			if len(failed) > 0 {
				t.Fatalf("%d of %d calls failed; first: %v", len(failed), callers*calls, failed[0])
			}
			if from["good"] == 0 {
				t.Fatalf("replies by server: %v, want the healthy one to answer", from)
			}
			obs.mu.Lock()
			t.Logf("replies by server: %v; picks %v, backups %d", from, obs.server, obs.backups)
			obs.mu.Unlock()
		})
	}
}
