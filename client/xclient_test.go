package client_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/internal/testutil"
	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/registry/static"
	"github.com/fleetrpc/fleet/selector"
	"github.com/fleetrpc/fleet/server"
)

type Req struct{ N int }
type Rep struct{ From string }

// node is one server of the "Echo" service with programmable behaviour.
type node struct {
	name  string
	srv   *server.Server
	addr  string
	calls atomic.Int64
	fn    func(n *node, ctx context.Context) error // nil: succeed
	done  chan struct{}
}

func startNode(t *testing.T, name string, fn func(n *node, ctx context.Context) error) *node {
	t.Helper()
	n := &node{name: name, fn: fn, done: make(chan struct{})}
	n.srv = server.New()
	if err := n.srv.RegisterFunction("Echo", "Do", func(ctx context.Context, in *Req, out *Rep) error {
		n.calls.Add(1)
		out.From = n.name
		if n.fn != nil {
			return n.fn(n, ctx)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n.addr = lis.Addr().String()
	go func() { defer close(n.done); n.srv.Serve(lis) }()
	t.Cleanup(func() { n.srv.Close(); <-n.done })
	return n
}

func inst(n *node, weight int) registry.Instance {
	return registry.Instance{Service: "Echo", Addr: n.addr, Weight: weight}
}

func newTable(t *testing.T, nodes ...*node) (*static.Table, *static.Registrar) {
	t.Helper()
	tab, err := static.NewTable(static.Config{})
	if err != nil {
		t.Fatal(err)
	}
	reg := tab.Registrar()
	for _, n := range nodes {
		if err := reg.Register(context.Background(), inst(n, 1)); err != nil {
			t.Fatal(err)
		}
	}
	return tab, reg
}

func newX(t *testing.T, tab *static.Table, opts ...client.XOption) *client.XClient {
	t.Helper()
	x, err := client.NewXClient("Echo", tab.Discovery(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	return x
}

// recordingSelector wraps a selector and counts how often each server is
// chosen.
type recordingSelector struct {
	selector.Selector
	mu    sync.Mutex
	count map[string]int64 // choices since reset; nil: not counted
}

func (r *recordingSelector) Select(p *selector.Pick) string {
	k := r.Selector.Select(p)
	r.mu.Lock()
	if r.count != nil {
		r.count[k]++
	}
	r.mu.Unlock()
	return k
}

func (r *recordingSelector) reset(k string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.count != nil {
		r.count[k] = 0
	}
}

func (r *recordingSelector) chosen(k string) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count[k]
}

// TestFailoverSurvivesKill: 1000 concurrent callers, three servers, one
// killed abruptly (listener and connections closed, still registered):
// no call fails, and once its connection failed the dead server stops
// being chosen: with a down time longer than the test, each caller chooses
// it at most once after the kill (the failure of that attempt marks it
// down before the caller chooses again). Counts, not timings: under -race
// the first failure may take a while to be seen.
func TestFailoverSurvivesKill(t *testing.T) {
	a, b, c := startNode(t, "a", nil), startNode(t, "b", nil), startNode(t, "c", nil)
	tab, _ := newTable(t, a, b, c)
	rec := &recordingSelector{Selector: selector.NewRoundRobin(), count: map[string]int64{}}
	x := newX(t, tab, client.WithSelector(rec), client.WithIdempotent("Do"), client.WithDownTime(time.Hour))

	const callers, perCaller = 1000, 30
	var failed atomic.Int64
	var firstErr atomic.Value
	var started sync.WaitGroup
	var wg sync.WaitGroup
	var done atomic.Int64
	killAt := int64(callers * perCaller / 3)
	killed := make(chan time.Time, 1)
	for i := 0; i < callers; i++ {
		wg.Add(1)
		started.Add(1)
		go func() {
			defer wg.Done()
			started.Done()
			for j := 0; j < perCaller; j++ {
				var rep Rep
				if err := x.Call(context.Background(), "Do", &Req{j}, &rep); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
				if done.Add(1) == killAt {
					c.srv.Close()
					killed <- time.Now()
					rec.reset(c.addr)
				}
			}
		}()
	}
	wg.Wait()
	if n := failed.Load(); n != 0 {
		t.Fatalf("%d calls failed; first: %v", n, firstErr.Load())
	}
	<-killed
	if n := rec.chosen(c.addr); n > callers {
		t.Fatalf("dead server chosen %d times after it was killed, want <= %d (once per caller)", n, callers)
	}
	t.Logf("served a=%d b=%d c=%d", a.calls.Load(), b.calls.Load(), c.calls.Load())
}

// TestGracefulShutdownFailfast: a server that shuts down gracefully leaves
// the clients' lists before it stops serving, so even Failfast sees no
// error.
func TestGracefulShutdownFailfast(t *testing.T) {
	a, b := startNode(t, "a", nil), startNode(t, "b", nil)
	tab, err := static.NewTable(static.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []*node{a, b} {
		if err := n.srv.Publish(context.Background(), tab.Registrar(), inst(n, 1), server.PublishConfig{DrainDelay: 200 * time.Millisecond, LoadInterval: -1}); err != nil {
			t.Fatal(err)
		}
	}
	x := newX(t, tab, client.WithFailMode(client.Failfast), client.WithSelector(selector.NewRoundRobin()))
	load := testutil.StartLoad(50, 0, func(int) error { return x.Call(context.Background(), "Do", &Req{}, &Rep{}) })
	time.Sleep(100 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	before := a.calls.Load()
	time.Sleep(100 * time.Millisecond)
	if _, n, first := load.Stop(); n != 0 {
		t.Fatalf("%d calls failed with Failfast; first: %v", n, first)
	}
	if a.calls.Load() == before {
		t.Fatal("no calls after the shutdown: the test proved nothing")
	}
	if got := x.Servers(); len(got) != 1 || got[0] != a.addr {
		t.Fatalf("client lists %v after b left", got)
	}
}

// TestRetryBudget: against a service that always fails with Unavailable,
// retries stay at or under 10% of calls.
func TestRetryBudget(t *testing.T) {
	fail := func(n *node, ctx context.Context) error { return fleet.NewError(fleet.Unavailable, "always") }
	a, b := startNode(t, "a", fail), startNode(t, "b", fail)
	tab, _ := newTable(t, a, b)
	x := newX(t, tab, client.WithMaxAttempts(5), client.WithBackoff(0, 0),
		client.WithRetryBudget(client.NewRetryBudget(0.1, 0, 10*time.Second)),
		client.WithBreaker(client.BreakerSettings{Disabled: true}))
	const calls = 1000
	var budgetErrs int
	for i := 0; i < calls; i++ {
		err := x.Call(context.Background(), "Do", &Req{}, &Rep{})
		if fleet.CodeOf(err) != fleet.Unavailable {
			t.Fatalf("err = %v", err)
		}
		if errors.Is(err, client.ErrBudgetExhausted) {
			budgetErrs++
		}
	}
	attempts := a.calls.Load() + b.calls.Load()
	retries := attempts - calls
	if retries > calls/10 {
		t.Fatalf("%d retries for %d calls: over 10%%", retries, calls)
	}
	if retries < calls/20 || budgetErrs == 0 {
		t.Fatalf("%d retries, %d refused by the budget: the budget was not exercised", retries, budgetErrs)
	}
}

// TestNoRetryAfterCancel: cancelling the context stops all retries.
func TestNoRetryAfterCancel(t *testing.T) {
	gate := make(chan struct{})
	slowFail := func(n *node, ctx context.Context) error {
		<-gate
		return fleet.NewError(fleet.Unavailable, "down")
	}
	a, b := startNode(t, "a", slowFail), startNode(t, "b", slowFail)
	tab, _ := newTable(t, a, b)
	x := newX(t, tab, client.WithMaxAttempts(5))
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- x.Call(ctx, "Do", &Req{}, &Rep{}) }()
	for a.calls.Load()+b.calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-errc; fleet.CodeOf(err) != fleet.Canceled {
		t.Fatalf("err = %v, want Canceled", err)
	}
	close(gate)
	// Give a wrongly scheduled retry every chance to arrive.
	time.Sleep(200 * time.Millisecond)
	if n := a.calls.Load() + b.calls.Load(); n != 1 {
		t.Fatalf("%d attempts after cancel, want 1", n)
	}
}

func TestFailtryRetriesSameServer(t *testing.T) {
	var first atomic.Bool
	flaky := func(n *node, ctx context.Context) error {
		if !first.Swap(true) {
			return fleet.NewError(fleet.Unavailable, "once")
		}
		return nil
	}
	a, b := startNode(t, "a", flaky), startNode(t, "b", flaky)
	tab, _ := newTable(t, a, b)
	x := newX(t, tab, client.WithFailMode(client.Failtry))
	var rep Rep
	if err := x.Call(context.Background(), "Do", &Req{}, &rep); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{"a": a.calls.Load(), "b": b.calls.Load()}
	if got[rep.From] != 2 || a.calls.Load()+b.calls.Load() != 2 {
		t.Fatalf("calls %v, reply from %s: want both attempts on one server", got, rep.From)
	}
}

func TestFailbackupTakesFasterReply(t *testing.T) {
	slow := startNode(t, "slow", func(n *node, ctx context.Context) error {
		select {
		case <-time.After(300 * time.Millisecond):
		case <-ctx.Done():
		}
		return nil
	})
	fast := startNode(t, "fast", nil)
	tab, _ := newTable(t, slow, fast)
	x := newX(t, tab, client.WithFailMode(client.Failbackup), client.WithBackupDelay(20*time.Millisecond),
		client.WithSelector(selector.NewRoundRobin()))
	for i := 0; i < 6; i++ {
		var rep Rep
		if err := x.Call(context.Background(), "Do", &Req{}, &rep); err != nil {
			t.Fatal(err)
		}
		if rep.From != "fast" {
			t.Fatalf("call %d: reply from %q", i, rep.From)
		}
	}
	if slow.calls.Load() == 0 {
		t.Fatal("the slow server was never tried first: the test proved nothing")
	}
}

func TestBroadcastAndFork(t *testing.T) {
	var failB atomic.Bool
	a := startNode(t, "a", nil)
	b := startNode(t, "b", func(n *node, ctx context.Context) error {
		if failB.Load() {
			return fleet.NewError(fleet.Internal, "b broke")
		}
		return nil
	})
	c := startNode(t, "c", nil)
	tab, _ := newTable(t, a, b, c)
	x := newX(t, tab)
	var rep Rep
	if err := x.Broadcast(context.Background(), "Do", &Req{}, &rep); err != nil {
		t.Fatal(err)
	}
	if a.calls.Load() != 1 || b.calls.Load() != 1 || c.calls.Load() != 1 {
		t.Fatal("broadcast did not reach every server")
	}
	failB.Store(true)
	if err := x.Broadcast(context.Background(), "Do", &Req{}, &rep); fleet.CodeOf(err) != fleet.Internal {
		t.Fatalf("broadcast with one failure: %v", err)
	}
	rep = Rep{}
	if err := x.Fork(context.Background(), "Do", &Req{}, &rep); err != nil || (rep.From != "a" && rep.From != "c") {
		t.Fatalf("fork: %v, reply from %q", err, rep.From)
	}
}

func TestBreakerSkipsFailingServer(t *testing.T) {
	bad := startNode(t, "bad", func(n *node, ctx context.Context) error { return fleet.NewError(fleet.Internal, "sick") })
	good := startNode(t, "good", nil)
	tab, _ := newTable(t, bad, good)
	x := newX(t, tab, client.WithFailMode(client.Failfast), client.WithSelector(selector.NewRoundRobin()),
		client.WithBreaker(client.BreakerSettings{Failures: 3, OpenFor: time.Minute}))
	for i := 0; i < 100; i++ {
		x.Call(context.Background(), "Do", &Req{}, &Rep{})
	}
	if n := bad.calls.Load(); n != 3 {
		t.Fatalf("failing server got %d calls, want 3 before its breaker opened", n)
	}
}

func TestServerLeavingClosesConnection(t *testing.T) {
	a, b := startNode(t, "a", nil), startNode(t, "b", nil)
	tab, reg := newTable(t, a, b)
	x := newX(t, tab, client.WithSelector(selector.NewRoundRobin()))
	for i := 0; i < 10; i++ {
		if err := x.Call(context.Background(), "Do", &Req{}, &Rep{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := reg.Deregister(context.Background(), inst(b, 1)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(x.Servers()) != 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	before := b.calls.Load()
	for i := 0; i < 20; i++ {
		if err := x.Call(context.Background(), "Do", &Req{}, &Rep{}); err != nil {
			t.Fatal(err)
		}
	}
	if b.calls.Load() != before {
		t.Fatal("a server that left discovery still got calls")
	}
}
