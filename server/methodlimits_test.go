package server_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/internal/testutil"
	"github.com/fleetrpc/fleet/server"
)

// gate is a handler that blocks until released, counting the calls that
// entered it.
type gate struct {
	entered atomic.Int64
	release chan struct{}
}

func newGate() *gate { return &gate{release: make(chan struct{})} }

func (g *gate) unary(ctx context.Context, in *Msg, out *Msg) error {
	g.entered.Add(1)
	select {
	case <-g.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	out.S = in.S
	return nil
}

func (g *gate) stream(ctx context.Context, req *Msg, st *server.ServerStream[Msg]) error {
	g.entered.Add(1)
	select {
	case <-g.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return st.Send(req)
}

// statOf returns the AdmissionStat of stage (for service.method when
// given), and whether the server reports it.
func statOf(srv *server.Server, stage, service, method string) (server.AdmissionStat, bool) {
	for _, st := range srv.AdmissionStats() {
		if st.Stage == stage && st.Service == service && st.Method == method {
			return st, true
		}
	}
	return server.AdmissionStat{}, false
}

// wantShed checks that err is a refusal by a limit: ResourceExhausted with
// a positive retry-after in md.
func wantShed(t *testing.T, what string, err error, md fleet.Metadata) {
	t.Helper()
	if fleet.CodeOf(err) != fleet.ResourceExhausted {
		t.Fatalf("%s: %v, want ResourceExhausted", what, err)
	}
	if md != nil {
		if ms, perr := strconv.Atoi(md[server.RetryAfterKey]); perr != nil || ms <= 0 {
			t.Fatalf("%s: retry-after %q, want a positive number of ms", what, md[server.RetryAfterKey])
		}
	}
}

// TestMethodConcurrencyCap: with SetMethodLimits' MaxConcurrent, calls of
// the method over the cap are refused with ResourceExhausted and the
// retry-after metadata on every route (native calls, Invoke, native stream
// opens, InvokeStream) without their handler running; other methods are
// not limited; AdmissionStats reports the cap, the calls in it and the
// refusals; once the running calls return, calls are admitted again.
func TestMethodConcurrencyCap(t *testing.T) {
	srv := server.New(server.WithLogger(discardLogger()))
	unary, streams := newGate(), newGate()
	if err := server.Handle(srv, "L", "Block", unary.unary); err != nil {
		t.Fatal(err)
	}
	if err := server.Handle(srv, "L", "Free", func(ctx context.Context, in *Msg, out *Msg) error { out.S = in.S; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := server.HandleServerStream(srv, "L", "Watch", streams.stream); err != nil {
		t.Fatal(err)
	}
	srv.SetMethodLimits("L", "Block", server.MethodLimits{MaxConcurrent: 2})
	srv.SetMethodLimits("L", "Watch", server.MethodLimits{MaxConcurrent: 1})
	if l, ok := srv.MethodLimitsOf("L", "Block"); !ok || l.MaxConcurrent != 2 || l.Rate != 0 {
		t.Fatalf("MethodLimitsOf = %+v %v", l, ok)
	}
	c := dial(t, testutil.Serve(t, srv))
	ctx := context.Background()

	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out Msg
			errs <- c.Call(ctx, "L", "Block", &Msg{S: "in"}, &out)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		st, err := client.CallServerStream[Msg, Msg](ctx, c, "L", "Watch", &Msg{S: "w"})
		if err != nil {
			errs <- err
			return
		}
		defer st.Close()
		for st.Receive() {
		}
		errs <- st.Err()
	}()
	waitFor(t, "two calls and a stream in their handlers", func() bool { return unary.entered.Load() == 2 && streams.entered.Load() == 1 })

	// Over the caps, on every route.
	var md fleet.Metadata
	var out Msg
	err := c.Call(fleet.WithResponseMetadata(ctx, &md), "L", "Block", &Msg{S: "x"}, &out)
	wantShed(t, "native call", err, md)
	_, md, err = srv.Invoke(ctx, &server.Call{Service: "L", Method: "Block", Codec: codec.JSONCodec{}, Payload: []byte(`{"S":"x"}`)})
	wantShed(t, "Invoke", err, md)
	st, err := client.CallServerStream[Msg, Msg](ctx, c, "L", "Watch", &Msg{S: "w"})
	if err == nil {
		for st.Receive() {
		}
		err = st.Err()
		st.Close()
	}
	wantShed(t, "native stream", err, nil)
	m := &memStream{in: jsonMsgs(t, "w")}
	tr, err := srv.InvokeStream(ctx, m.call("L", "Watch", nil))
	wantShed(t, "InvokeStream", err, tr)
	if n, s := unary.entered.Load(), streams.entered.Load(); n != 2 || s != 1 {
		t.Fatalf("refused calls ran: %d unary, %d streams entered", n, s)
	}
	// Another method is not limited.
	if err := c.Call(ctx, "L", "Free", &Msg{S: "f"}, &out); err != nil || out.S != "f" {
		t.Fatalf("unlimited method: %v %q", err, out.S)
	}

	if s, ok := statOf(srv, server.StageMethodConcurrency, "L", "Block"); !ok || s.Limit != 2 || s.InUse != 2 || s.Refused != 2 {
		t.Fatalf("Block's stat = %+v %v, want limit 2, 2 in use, 2 refused", s, ok)
	}
	if s, ok := statOf(srv, server.StageMethodConcurrency, "L", "Watch"); !ok || s.Limit != 1 || s.InUse != 1 || s.Refused != 2 {
		t.Fatalf("Watch's stat = %+v %v, want limit 1, 1 in use, 2 refused", s, ok)
	}

	close(unary.release)
	close(streams.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("admitted call: %v", err)
		}
	}
	waitFor(t, "the slots to be given back", func() bool {
		a, _ := statOf(srv, server.StageMethodConcurrency, "L", "Block")
		b, _ := statOf(srv, server.StageMethodConcurrency, "L", "Watch")
		return a.InUse == 0 && b.InUse == 0
	})
	if err := c.Call(ctx, "L", "Block", &Msg{S: "again"}, &out); err != nil || out.S != "again" {
		t.Fatalf("call under the cap after the others returned: %v %q", err, out.S)
	}

	// A zero MethodLimits removes the limits.
	srv.SetMethodLimits("L", "Block", server.MethodLimits{})
	if _, ok := srv.MethodLimitsOf("L", "Block"); ok {
		t.Fatal("limits left after SetMethodLimits with the zero value")
	}
	if _, ok := statOf(srv, server.StageMethodConcurrency, "L", "Block"); ok {
		t.Fatal("AdmissionStats reports a removed cap")
	}
}

// TestMethodRateLive: SetMethodLimits changes a method's rate limit while
// the server runs, for native calls and Invoke alike: one token every
// 100 s admits the burst and refuses the rest; removing the limit admits
// every call; WithMethodRateLimit seeds the same table.
func TestMethodRateLive(t *testing.T) {
	var ran atomic.Int64
	srv := server.New(server.WithMethodRateLimit("R", "Echo", 0.01, 2))
	if err := server.Handle(srv, "R", "Echo", func(ctx context.Context, in *Msg, out *Msg) error {
		ran.Add(1)
		out.S = in.S
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if l, ok := srv.MethodLimitsOf("R", "Echo"); !ok || l.Rate != 0.01 || l.Burst != 2 {
		t.Fatalf("WithMethodRateLimit: MethodLimitsOf = %+v %v", l, ok)
	}
	c := dial(t, testutil.Serve(t, srv))
	ctx := context.Background()
	call := func() (fleet.Metadata, error) {
		var md fleet.Metadata
		var out Msg
		return md, c.Call(fleet.WithResponseMetadata(ctx, &md), "R", "Echo", &Msg{S: "x"}, &out)
	}
	invoke := func() (fleet.Metadata, error) {
		_, md, err := srv.Invoke(ctx, &server.Call{Service: "R", Method: "Echo", Codec: codec.JSONCodec{}, Payload: []byte(`{"S":"x"}`)})
		return md, err
	}
	for i := range 2 {
		if _, err := call(); err != nil {
			t.Fatalf("call %d within the burst: %v", i, err)
		}
	}
	md, err := call()
	wantShed(t, "native call over the rate", err, md)
	md, err = invoke()
	wantShed(t, "Invoke over the rate", err, md)

	srv.SetMethodLimits("R", "Echo", server.MethodLimits{})
	for i := range 20 {
		if _, err := call(); err != nil {
			t.Fatalf("call %d after the limit was removed: %v", i, err)
		}
	}
	srv.SetMethodLimits("R", "Echo", server.MethodLimits{Rate: 0.01}) // burst 1 by default
	if _, err := invoke(); err != nil {
		t.Fatalf("first Invoke under the new limit: %v", err)
	}
	md, err = invoke()
	wantShed(t, "Invoke over the new rate", err, md)
	if got := ran.Load(); got != 23 {
		t.Fatalf("%d calls ran, want 23 (the admitted ones only)", got)
	}
	if s, ok := statOf(srv, server.StageMethodRate, "R", "Echo"); !ok || s.Limit != 0.01 || s.Refused != 3 {
		t.Fatalf("method-rate stat = %+v %v, want limit 0.01 and 3 refused", s, ok)
	}
}

// TestMethodCapOneway: oneway sends over a method's concurrency cap are
// not dropped: the read loop waits for a slot (AdmissionStats shows one
// waiting); a cap raised by SetMethodLimits lets the waiting send in at
// once, and every send runs.
func TestMethodCapOneway(t *testing.T) {
	srv := server.New()
	var ran atomic.Int64
	release := make(chan struct{})
	if err := server.Handle(srv, "O", "Ship", func(ctx context.Context, in *Msg, _ *Msg) error {
		ran.Add(1)
		<-release
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	srv.SetMethodLimits("O", "Ship", server.MethodLimits{MaxConcurrent: 1})
	c := dial(t, testutil.Serve(t, srv))
	const sends = 5
	for i := range sends {
		if err := c.Send(context.Background(), "O", "Ship", &Msg{S: "line"}); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	waitFor(t, "one send running and the next waiting", func() bool {
		s, _ := statOf(srv, server.StageMethodConcurrency, "O", "Ship")
		return ran.Load() == 1 && s.InUse == 1 && s.Waiting == 1
	})
	// Raising the cap lets the waiting send in, while the first still
	// runs, and the rest after it.
	srv.SetMethodLimits("O", "Ship", server.MethodLimits{MaxConcurrent: sends})
	waitFor(t, "every send to run at once under the raised cap", func() bool {
		s, _ := statOf(srv, server.StageMethodConcurrency, "O", "Ship")
		return ran.Load() == sends && s.InUse == sends && s.Waiting == 0
	})
	close(release)
	waitFor(t, "the sends to return", func() bool {
		s, _ := statOf(srv, server.StageMethodConcurrency, "O", "Ship")
		return s.InUse == 0
	})
	if s, _ := statOf(srv, server.StageMethodConcurrency, "O", "Ship"); s.Refused != 0 {
		t.Fatalf("oneway sends refused: %+v", s)
	}
}

// TestSetMethodLimitsConcurrent: changing a method's limits while calls of
// it run (under -race) leaves its count balanced: once the calls end, none
// is counted in use, and every call either ran or was refused with
// ResourceExhausted.
func TestSetMethodLimitsConcurrent(t *testing.T) {
	srv := server.New()
	if err := server.Handle(srv, "C", "Echo", func(ctx context.Context, in *Msg, out *Msg) error { out.S = in.S; return nil }); err != nil {
		t.Fatal(err)
	}
	c := dial(t, testutil.Serve(t, srv))
	stop := make(chan struct{})
	var setter sync.WaitGroup
	setter.Add(1)
	go func() {
		defer setter.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			srv.SetMethodLimits("C", "Echo", server.MethodLimits{MaxConcurrent: 1 + i%3, Rate: float64(1000 * (i % 2)), Burst: 50})
			_ = srv.AdmissionStats()
		}
	}()
	var callers sync.WaitGroup
	for range 4 {
		callers.Add(1)
		go func() {
			defer callers.Done()
			for range 50 {
				var out Msg
				err := c.Call(context.Background(), "C", "Echo", &Msg{S: "x"}, &out)
				if err != nil && fleet.CodeOf(err) != fleet.ResourceExhausted {
					t.Errorf("call: %v", err)
					return
				}
			}
		}()
	}
	callers.Wait()
	close(stop)
	setter.Wait()
	srv.SetMethodLimits("C", "Echo", server.MethodLimits{MaxConcurrent: 5})
	if s, ok := statOf(srv, server.StageMethodConcurrency, "C", "Echo"); !ok || s.InUse != 0 {
		t.Fatalf("after the calls: %+v %v, want none in use", s, ok)
	}
}

// TestSetServiceLimitsAtomic: SetServiceLimits changes several methods in
// one step. A reader of AdmissionStats (one load of the limits table)
// running under -race while the limits of A and B flip between two sets
// never sees A's limit from one set with B's from the other, which
// setting them method by method would show; the methods not named keep
// their limits, and a zero MethodLimits removes one.
func TestSetServiceLimitsAtomic(t *testing.T) {
	srv := server.New()
	srv.SetMethodLimits("S", "Kept", server.MethodLimits{MaxConcurrent: 7})
	set := func(n int) {
		srv.SetServiceLimits("S", map[string]server.MethodLimits{
			"A": {Rate: float64(n), MaxConcurrent: n},
			"B": {Rate: float64(n), MaxConcurrent: n},
			"C": {Rate: float64(n), MaxConcurrent: n},
		})
	}
	set(1)
	stop := make(chan struct{})
	var setter sync.WaitGroup
	setter.Add(1)
	go func() {
		defer setter.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			set(1 + i%2)
		}
	}()
	seen := map[float64]int{}
	for range 2000 {
		limits := map[string]float64{}
		for _, st := range srv.AdmissionStats() {
			if st.Service == "S" && st.Stage == server.StageMethodConcurrency && st.Method != "Kept" {
				limits[st.Method] = st.Limit
			}
		}
		if len(limits) != 3 || limits["A"] != limits["B"] || limits["B"] != limits["C"] {
			close(stop)
			setter.Wait()
			t.Fatalf("a torn set of limits: %v", limits)
		}
		seen[limits["A"]]++
	}
	close(stop)
	setter.Wait()
	if len(seen) < 2 {
		t.Logf("the reader saw only %v: the setter did not run in between", seen)
	}
	if l, ok := srv.MethodLimitsOf("S", "Kept"); !ok || l.MaxConcurrent != 7 {
		t.Fatalf("a method not named lost its limits: %+v %v", l, ok)
	}
	srv.SetServiceLimits("S", map[string]server.MethodLimits{"A": {}, "B": {MaxConcurrent: 3}})
	if _, ok := srv.MethodLimitsOf("S", "A"); ok {
		t.Fatal("a zero MethodLimits did not remove A's limits")
	}
	if l, _ := srv.MethodLimitsOf("S", "B"); l != (server.MethodLimits{MaxConcurrent: 3}) {
		t.Fatalf("B: %+v", l)
	}
	if l, _ := srv.MethodLimitsOf("S", "C"); l.MaxConcurrent == 0 {
		t.Fatalf("C, not named, lost its limits: %+v", l)
	}
}
