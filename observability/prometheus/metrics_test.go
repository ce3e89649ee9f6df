package fleetprom_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/internal/testutil"
	fleetprom "github.com/fleetrpc/fleet/observability/prometheus"
	"github.com/fleetrpc/fleet/server"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

type Args struct{ A, B int }

type Arith struct{}

func (Arith) Add(args *Args, reply *int) error {
	*reply = args.A + args.B
	return nil
}

func (Arith) Div(args *Args, reply *int) error {
	if args.B == 0 {
		return fleet.NewError(fleet.InvalidArgument, "divide by zero")
	}
	*reply = args.A / args.B
	return nil
}

// serve registers Arith on srv and starts it on a loopback port, shut
// down when the test ends.
func serve(t *testing.T, srv *server.Server) string { return serveB(t, srv) }

func serveB(t testing.TB, srv *server.Server) string {
	t.Helper()
	if err := srv.Register(Arith{}); err != nil {
		t.Fatal(err)
	}
	return testutil.Serve(t, srv)
}

// families gathers reg into a map by metric name.
func families(t *testing.T, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// find returns the metric of family name whose labels include want.
func find(fams map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	mf := fams[name]
	if mf == nil {
		return nil
	}
next:
	for _, m := range mf.GetMetric() {
		got := map[string]string{}
		for _, lp := range m.GetLabel() {
			got[lp.GetName()] = lp.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		return m
	}
	return nil
}

func counter(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	t.Helper()
	m := find(fams, name, labels)
	if m == nil {
		t.Fatalf("no series %s%v", name, labels)
	}
	return m.GetCounter().GetValue()
}

// TestServerAndClientMetrics makes known calls over TCP and checks every
// server and client metric the calls must have moved.
func TestServerAndClientMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	sm := fleetprom.NewServerMetrics(fleetprom.WithConstLabels(prometheus.Labels{"instance": "a"}))
	cm := fleetprom.NewClientMetrics()
	reg.MustRegister(sm, cm)
	addr := serve(t, server.New(sm.Option()))

	// Registration alone creates the series, at zero.
	fams := families(t, reg)
	if v := counter(t, fams, "fleet_server_handled_total", map[string]string{"service": "Arith", "method": "Div", "code": "ok", "instance": "a"}); v != 0 {
		t.Fatalf("handled before any call = %v", v)
	}

	c, err := client.Dial(context.Background(), "tcp", addr, cm.Option())
	if err != nil {
		t.Fatal(err)
	}
	const adds, divErrs = 7, 3
	var sum int
	for i := 0; i < adds; i++ {
		if err := c.Call(context.Background(), "Arith", "Add", &Args{A: i, B: 1}, &sum); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < divErrs; i++ {
		if err := c.Call(context.Background(), "Arith", "Div", &Args{A: 1}, &sum); fleet.CodeOf(err) != fleet.InvalidArgument {
			t.Fatalf("Div by zero: %v", err)
		}
	}
	if err := c.Call(context.Background(), "Arith", "Nope", &Args{}, &sum); fleet.CodeOf(err) != fleet.NotFound {
		t.Fatalf("unknown method: %v", err)
	}
	c.Close()

	fams = families(t, reg)
	add := map[string]string{"service": "Arith", "method": "Add"}
	div := map[string]string{"service": "Arith", "method": "Div"}
	with := func(l map[string]string, k, v string) map[string]string {
		o := map[string]string{k: v}
		for a, b := range l {
			o[a] = b
		}
		return o
	}
	checks := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"fleet_server_started_total", add, adds},
		{"fleet_server_handled_total", with(add, "code", "ok"), adds},
		{"fleet_server_started_total", div, divErrs},
		{"fleet_server_handled_total", with(div, "code", "invalid_argument"), divErrs},
		{"fleet_server_refused_total", map[string]string{"code": "not_found"}, 1},
		{"fleet_server_connections_accepted_total", nil, 1},
		{"fleet_client_started_total", add, adds},
		{"fleet_client_handled_total", with(add, "code", "ok"), adds},
		{"fleet_client_handled_total", with(div, "code", "invalid_argument"), divErrs},
		{"fleet_client_handled_total", map[string]string{"method": "Nope", "code": "not_found"}, 1},
	}
	for _, ck := range checks {
		if got := counter(t, fams, ck.name, ck.labels); got != ck.want {
			t.Errorf("%s%v = %v, want %v", ck.name, ck.labels, got, ck.want)
		}
	}
	for _, name := range []string{"fleet_server_received_bytes_total", "fleet_server_sent_bytes_total"} {
		if got := counter(t, fams, name, nil); got <= 0 {
			t.Errorf("%s = %v, want > 0", name, got)
		}
	}
	for _, name := range []string{"fleet_server_handling_seconds", "fleet_client_handling_seconds"} {
		h := find(fams, name, add).GetHistogram()
		if h.GetSampleCount() != adds {
			t.Errorf("%s count = %d, want %d", name, h.GetSampleCount(), adds)
		}
		if len(h.GetBucket()) == 0 {
			t.Errorf("%s has no classic buckets", name)
		}
		if h.GetSchema() == 0 && len(h.GetPositiveSpan()) == 0 && h.GetZeroCount() == 0 {
			t.Errorf("%s has no native histogram", name)
		}
	}
	if g := find(fams, "fleet_server_in_flight", add).GetGauge().GetValue(); g != 0 {
		t.Errorf("in flight after the calls = %v", g)
	}
	// The server closes its side once the client is gone.
	deadline := time.Now().Add(20 * time.Second)
	for {
		g := find(families(t, reg), "fleet_server_connections", nil).GetGauge().GetValue()
		if g == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fleet_server_connections = %v 20 s after the client closed", g)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestInFlight: a call blocked in its handler shows in the in-flight
// gauge until it returns.
func TestInFlight(t *testing.T) {
	reg := prometheus.NewRegistry()
	sm := fleetprom.NewServerMetrics()
	reg.MustRegister(sm)
	release := make(chan struct{})
	entered := make(chan struct{})
	srv := server.New(sm.Option())
	if err := srv.RegisterFunction("Slow", "Wait", func(ctx context.Context, args *int, reply *int) error {
		close(entered)
		<-release
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	addr := serve(t, srv)
	c, err := client.Dial(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	errc := make(chan error, 1)
	go func() {
		var r int
		errc <- c.Call(context.Background(), "Slow", "Wait", new(int), &r)
	}()
	<-entered
	l := map[string]string{"service": "Slow", "method": "Wait"}
	if g := find(families(t, reg), "fleet_server_in_flight", l).GetGauge().GetValue(); g != 1 {
		t.Errorf("in flight during the call = %v, want 1", g)
	}
	close(release)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if g := find(families(t, reg), "fleet_server_in_flight", l).GetGauge().GetValue(); g != 0 {
		t.Errorf("in flight after the call = %v, want 0", g)
	}
}

// TestInFlightMany: the in-flight gauge, derived from the started and
// handled counts when collected, counts every call blocked in its handler
// while others come and go with every outcome (ok, handler errors, a
// panic), is 0 once all have returned, and is scraped concurrently with
// the calls without going negative.
func TestInFlightMany(t *testing.T) {
	reg := prometheus.NewRegistry()
	sm := fleetprom.NewServerMetrics()
	reg.MustRegister(sm)
	release := make(chan struct{})
	var entered sync.WaitGroup
	srv := server.New(sm.Option())
	if err := srv.RegisterFunction("Slow", "Wait", func(ctx context.Context, args *int, reply *int) error {
		entered.Done()
		<-release
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := srv.RegisterFunction("Slow", "Fast", func(ctx context.Context, args *int, reply *int) error {
		switch *args % 3 {
		case 1:
			return fleet.Errorf(fleet.NotFound, "no %d", *args)
		case 2:
			panic("handler panics")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(context.Background(), "tcp", serve(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const blocked = 5
	entered.Add(blocked)
	var calls sync.WaitGroup
	for range blocked {
		calls.Add(1)
		go func() {
			defer calls.Done()
			var r int
			if err := c.Call(context.Background(), "Slow", "Wait", new(int), &r); err != nil {
				t.Error(err)
			}
		}()
	}
	entered.Wait()
	wait := map[string]string{"service": "Slow", "method": "Wait"}
	fast := map[string]string{"service": "Slow", "method": "Fast"}
	stop := make(chan struct{})
	scraped := make(chan error, 1)
	go func() { // scrape while the fast calls run
		for {
			select {
			case <-stop:
				scraped <- nil
				return
			default:
			}
			mfs, err := reg.Gather()
			if err != nil {
				scraped <- err
				return
			}
			for _, mf := range mfs {
				if mf.GetName() != "fleet_server_in_flight" {
					continue
				}
				for _, m := range mf.GetMetric() {
					if g := m.GetGauge().GetValue(); g < 0 {
						scraped <- fmt.Errorf("in flight of %v = %v", m.GetLabel(), g)
						return
					}
				}
			}
		}
	}()
	for i := range 60 {
		var r int
		n := i
		c.Call(context.Background(), "Slow", "Fast", &n, &r) // two in three fail, by design
	}
	close(stop)
	if err := <-scraped; err != nil {
		t.Error(err)
	}
	fams := families(t, reg)
	if g := find(fams, "fleet_server_in_flight", wait).GetGauge().GetValue(); g != blocked {
		t.Errorf("in flight of Wait = %v, want %d", g, blocked)
	}
	if g := find(fams, "fleet_server_in_flight", fast).GetGauge().GetValue(); g != 0 {
		t.Errorf("in flight of Fast after its calls = %v, want 0", g)
	}
	close(release)
	calls.Wait()
	if g := find(families(t, reg), "fleet_server_in_flight", wait).GetGauge().GetValue(); g != 0 {
		t.Errorf("in flight of Wait after its calls = %v, want 0", g)
	}
}

// TestExemplar: WithExemplar's labels are attached to the observation.
func TestExemplar(t *testing.T) {
	reg := prometheus.NewRegistry()
	type key struct{}
	cm := fleetprom.NewClientMetrics(fleetprom.WithExemplar(func(ctx context.Context) prometheus.Labels {
		if id, ok := ctx.Value(key{}).(string); ok {
			return prometheus.Labels{"trace_id": id}
		}
		return nil
	}))
	reg.MustRegister(cm)
	addr := serve(t, server.New())
	c, err := client.Dial(context.Background(), "tcp", addr, cm.Option())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var r int
	if err := c.Call(context.WithValue(context.Background(), key{}, "abc"), "Arith", "Add", &Args{1, 2}, &r); err != nil {
		t.Fatal(err)
	}
	h := find(families(t, reg), "fleet_client_handling_seconds", nil).GetHistogram()
	var found bool
	for _, b := range h.GetBucket() {
		if ex := b.GetExemplar(); ex != nil && len(ex.GetLabel()) == 1 && ex.GetLabel()[0].GetValue() == "abc" {
			found = true
		}
	}
	for _, ex := range h.GetExemplars() {
		if len(ex.GetLabel()) == 1 && ex.GetLabel()[0].GetValue() == "abc" {
			found = true
		}
	}
	if !found {
		t.Fatalf("no exemplar with trace_id=abc in %v", h)
	}
}
