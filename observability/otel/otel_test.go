package fleetotel_test

import (
	"context"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/internal/testutil"
	fleetotel "github.com/fleetrpc/fleet/observability/otel"
	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/registry/static"
	"github.com/fleetrpc/fleet/server"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

type Req struct{ N int }
type Rep struct {
	N       int
	Tenant  string
	TraceID string
}

func dial(t *testing.T, addr string, opts ...client.Option) *client.Client {
	return dialB(t, addr, opts...)
}

func dialB(t testing.TB, addr string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.Dial(context.Background(), "tcp", addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

func byName(spans []sdktrace.ReadOnlySpan, name string, kind trace.SpanKind) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == name && s.SpanKind() == kind {
			out = append(out, s)
		}
	}
	return out
}

func one(t *testing.T, spans []sdktrace.ReadOnlySpan, name string, kind trace.SpanKind) sdktrace.ReadOnlySpan {
	t.Helper()
	got := byName(spans, name, kind)
	if len(got) != 1 {
		t.Fatalf("%d %s spans named %s, want 1 (of %d spans)", len(got), kind, name, len(spans))
	}
	return got[0]
}

// TestTraceAcrossServices: client → Front.Do (server) → client → Back.Do
// (server), every hop a real TCP connection. All four spans share the
// root's trace id, each is the child of the previous one, the attributes
// follow the RPC conventions, and baggage set by the first caller reaches
// the last handler.
func TestTraceAcrossServices(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	defer tp.Shutdown(context.Background())
	tel := fleetotel.New(fleetotel.WithTracerProvider(tp))

	back := server.New(tel.ServerOption())
	if err := back.RegisterFunction("Back", "Do", func(ctx context.Context, in *Req, out *Rep) error {
		out.N = in.N * 2
		out.Tenant = baggage.FromContext(ctx).Member("tenant").Value()
		out.TraceID = trace.SpanContextFromContext(ctx).TraceID().String()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	backAddr := testutil.Serve(t, back)
	backClient := dial(t, backAddr, tel.ClientOptionFor(backAddr))

	front := server.New(tel.ServerOption())
	if err := front.RegisterFunction("Front", "Do", func(ctx context.Context, in *Req, out *Rep) error {
		return backClient.Call(ctx, "Back", "Do", &Req{N: in.N + 1}, out)
	}); err != nil {
		t.Fatal(err)
	}
	frontAddr := testutil.Serve(t, front)
	c := dial(t, frontAddr, tel.ClientOption())

	member, _ := baggage.NewMember("tenant", "acme")
	bag, _ := baggage.New(member)
	ctx := baggage.ContextWithBaggage(context.Background(), bag)
	ctx, root := tp.Tracer("test").Start(ctx, "root")
	var out Rep
	err := c.Call(ctx, "Front", "Do", &Req{N: 20}, &out)
	root.End()
	if err != nil {
		t.Fatal(err)
	}
	if out.N != 42 || out.Tenant != "acme" {
		t.Fatalf("reply %+v, want N=42 Tenant=acme", out)
	}
	traceID := root.SpanContext().TraceID()
	if out.TraceID != traceID.String() {
		t.Fatalf("the last handler saw trace %s, want %s", out.TraceID, traceID)
	}

	spans := sr.Ended()
	c1 := one(t, spans, "Front/Do", trace.SpanKindClient)
	s1 := one(t, spans, "Front/Do", trace.SpanKindServer)
	c2 := one(t, spans, "Back/Do", trace.SpanKindClient)
	s2 := one(t, spans, "Back/Do", trace.SpanKindServer)
	chain := []struct {
		span   sdktrace.ReadOnlySpan
		parent trace.SpanContext
	}{
		{c1, root.SpanContext()}, {s1, c1.SpanContext()}, {c2, s1.SpanContext()}, {s2, c2.SpanContext()},
	}
	for i, l := range chain {
		if l.span.SpanContext().TraceID() != traceID {
			t.Errorf("span %d (%s %s) has trace %s, want %s", i, l.span.SpanKind(), l.span.Name(), l.span.SpanContext().TraceID(), traceID)
		}
		if l.span.Parent().SpanID() != l.parent.SpanID() {
			t.Errorf("span %d (%s %s) has parent %s, want %s", i, l.span.SpanKind(), l.span.Name(), l.span.Parent().SpanID(), l.parent.SpanID())
		}
		if !l.span.Parent().IsRemote() && l.span.SpanKind() == trace.SpanKindServer {
			t.Errorf("server span %d: parent not remote", i)
		}
	}

	_, port, _ := net.SplitHostPort(backAddr)
	wantPort, _ := strconv.Atoi(port)
	a := attrs(s2)
	want := map[attribute.Key]attribute.Value{
		"rpc.system":               attribute.StringValue("fleet"),
		"rpc.service":              attribute.StringValue("Back"),
		"rpc.method":               attribute.StringValue("Do"),
		"rpc.response.status_code": attribute.StringValue("ok"),
		"server.address":           attribute.StringValue("127.0.0.1"),
		"server.port":              attribute.IntValue(wantPort),
		"client.address":           attribute.StringValue("127.0.0.1"),
	}
	for k, v := range want {
		if a[k] != v {
			t.Errorf("server span %s = %v, want %v", k, a[k].Emit(), v.Emit())
		}
	}
	ca := attrs(c2)
	for _, k := range []attribute.Key{"rpc.system", "rpc.service", "rpc.method", "rpc.response.status_code", "server.address", "server.port"} {
		if ca[k] != want[k] {
			t.Errorf("client span %s = %v, want %v", k, ca[k].Emit(), want[k].Emit())
		}
	}
	for _, s := range spans {
		if s.Status().Code == codes.Error {
			t.Errorf("span %s %s has status Error", s.SpanKind(), s.Name())
		}
	}
}

// TestErrorStatus: an application error (InvalidArgument) marks the
// client span failed but not the server span; a server fault (Internal)
// marks both; both carry the code.
func TestErrorStatus(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	defer tp.Shutdown(context.Background())
	tel := fleetotel.New(fleetotel.WithTracerProvider(tp))
	srv := server.New(tel.ServerOption())
	if err := srv.RegisterFunction("E", "Bad", func(ctx context.Context, in *Req, out *Rep) error {
		return fleet.NewError(fleet.InvalidArgument, "bad n")
	}); err != nil {
		t.Fatal(err)
	}
	if err := srv.RegisterFunction("E", "Boom", func(ctx context.Context, in *Req, out *Rep) error {
		panic("boom")
	}); err != nil {
		t.Fatal(err)
	}
	c := dial(t, testutil.Serve(t, srv), tel.ClientOption())
	for _, tc := range []struct {
		method      string
		code        fleet.Code
		serverError bool
	}{{"Bad", fleet.InvalidArgument, false}, {"Boom", fleet.Internal, true}} {
		var out Rep
		if err := c.Call(context.Background(), "E", tc.method, &Req{}, &out); fleet.CodeOf(err) != tc.code {
			t.Fatalf("%s: %v, want %s", tc.method, err, tc.code)
		}
		spans := sr.Ended()
		cs := one(t, spans, "E/"+tc.method, trace.SpanKindClient)
		ss := one(t, spans, "E/"+tc.method, trace.SpanKindServer)
		if cs.Status().Code != codes.Error {
			t.Errorf("%s: client span status %v, want Error", tc.method, cs.Status())
		}
		if got := ss.Status().Code == codes.Error; got != tc.serverError {
			t.Errorf("%s: server span status %v, want error=%v", tc.method, ss.Status(), tc.serverError)
		}
		for _, s := range []sdktrace.ReadOnlySpan{cs, ss} {
			a := attrs(s)
			if a["rpc.response.status_code"].AsString() != tc.code.String() || a["error.type"].AsString() != tc.code.String() {
				t.Errorf("%s %s: status_code=%q error.type=%q, want %q", tc.method, s.SpanKind(), a["rpc.response.status_code"].AsString(), a["error.type"].AsString(), tc.code)
			}
		}
	}
}

// TestXClientFailover: the first attempt of an XClient call fails with
// Unavailable (refused unprocessed) and the XClient fails over to the other
// server. Both attempts are client spans under the caller's span, in one
// trace, each with its own server span below it.
func TestXClientFailover(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	defer tp.Shutdown(context.Background())
	tel := fleetotel.New(fleetotel.WithTracerProvider(tp))

	var calls atomic.Int64 // across both servers: the first call fails
	var instances []registry.Instance
	for i := 0; i < 2; i++ {
		srv := server.New(tel.ServerOption())
		if err := srv.RegisterFunction("Echo", "Do", func(ctx context.Context, in *Req, out *Rep) error {
			if calls.Add(1) == 1 {
				return fleet.NewError(fleet.Unavailable, "busy")
			}
			out.N = in.N
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		instances = append(instances, registry.Instance{Service: "Echo", Addr: testutil.Serve(t, srv)})
	}
	disc, err := static.NewDiscovery(static.Config{Instances: instances})
	if err != nil {
		t.Fatal(err)
	}
	x, err := client.NewXClient("Echo", disc, client.WithFailMode(client.Failover), tel.XClientOption())
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()

	ctx, root := tp.Tracer("test").Start(context.Background(), "logical call")
	var out Rep
	err = x.Call(ctx, "Do", &Req{N: 7}, &out)
	root.End()
	if err != nil || out.N != 7 {
		t.Fatalf("call: %v %+v", err, out)
	}
	spans := sr.Ended()
	attempts := byName(spans, "Echo/Do", trace.SpanKindClient)
	served := byName(spans, "Echo/Do", trace.SpanKindServer)
	if len(attempts) != 2 || len(served) != 2 {
		t.Fatalf("%d client and %d server spans, want 2 and 2", len(attempts), len(served))
	}
	var failed, ok int
	for _, a := range attempts {
		if a.Parent().SpanID() != root.SpanContext().SpanID() || a.SpanContext().TraceID() != root.SpanContext().TraceID() {
			t.Errorf("attempt span not a child of the logical call span")
		}
		switch attrs(a)["rpc.response.status_code"].AsString() {
		case "unavailable":
			failed++
		case "ok":
			ok++
		}
		var below int
		for _, s := range served {
			if s.Parent().SpanID() == a.SpanContext().SpanID() {
				below++
			}
		}
		if below != 1 {
			t.Errorf("attempt span has %d server spans below it, want 1", below)
		}
	}
	if failed != 1 || ok != 1 {
		t.Errorf("attempts: %d unavailable, %d ok; want 1 and 1", failed, ok)
	}
}

// TestCallDurationMetrics: rpc.server.call.duration and
// rpc.client.call.duration record one sample per call with the RPC
// attributes, read with the SDK's manual reader.
func TestCallDurationMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	tel := fleetotel.New(fleetotel.WithMeterProvider(mp))
	srv := server.New(tel.ServerOption())
	if err := srv.RegisterFunction("M", "Do", func(ctx context.Context, in *Req, out *Rep) error { return nil }); err != nil {
		t.Fatal(err)
	}
	c := dial(t, testutil.Serve(t, srv), tel.ClientOption())
	const n = 5
	for i := 0; i < n; i++ {
		var out Rep
		if err := c.Call(context.Background(), "M", "Do", &Req{}, &out); err != nil {
			t.Fatal(err)
		}
	}
	found := durationCounts(t, reader, func(a attribute.Set) bool {
		svc, _ := a.Value("rpc.service")
		code, _ := a.Value("rpc.response.status_code")
		sys, _ := a.Value("rpc.system")
		return svc.AsString() == "M" && code.AsString() == "ok" && sys.AsString() == "fleet"
	})
	for _, name := range []string{"rpc.server.call.duration", "rpc.client.call.duration"} {
		if found[name] != n {
			t.Errorf("%s: %d samples, want %d", name, found[name], n)
		}
	}
}

// TestUnsampledCall: a call whose trace the caller did not sample records
// no span on either side, still carries its trace context (flags 00) to
// the server, whose ParentBased sampler follows the caller's decision and
// keeps the trace id, and still counts in the duration metrics.
func TestUnsampledCall(t *testing.T) {
	rec, reader, tel := recordedTelemetry(t)

	srv := server.New(tel.ServerOption())
	type seen struct {
		sc          trace.SpanContext
		recording   bool
		traceparent string
	}
	got := make(chan seen, 1)
	if err := srv.RegisterFunction("U", "Do", func(ctx context.Context, in *Req, out *Rep) error {
		got <- seen{trace.SpanContextFromContext(ctx), trace.SpanFromContext(ctx).IsRecording(), fleet.IncomingMetadata(ctx)["traceparent"]}
		return fleet.Errorf(fleet.Internal, "fails, to exercise the error path")
	}); err != nil {
		t.Fatal(err)
	}
	c := dial(t, testutil.Serve(t, srv), tel.ClientOption())

	tid, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	sid, _ := trace.SpanIDFromHex("b7ad6b7169203331")
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, Remote: true}) // not sampled
	ctx := trace.ContextWithSpanContext(context.Background(), parent)
	var out Rep
	if err := c.Call(ctx, "U", "Do", &Req{}, &out); fleet.CodeOf(err) != fleet.Internal {
		t.Fatalf("call: %v, want the handler's internal error", err)
	}
	s := <-got
	if s.sc.TraceID() != tid || s.sc.IsSampled() || s.recording {
		t.Errorf("server span: trace %s sampled %v recording %v, want trace %s unsampled and not recording",
			s.sc.TraceID(), s.sc.IsSampled(), s.recording, tid)
	}
	if want := "00-" + tid.String() + "-"; len(s.traceparent) != 55 || s.traceparent[:len(want)] != want || s.traceparent[53:] != "00" {
		t.Errorf("traceparent %q, want %s<span id>-00", s.traceparent, want)
	}
	if n := len(rec.Ended()); n != 0 {
		t.Errorf("%d spans recorded, want 0", n)
	}

	counts := durationCounts(t, reader, func(a attribute.Set) bool {
		code, _ := a.Value("rpc.response.status_code")
		return code.AsString() == "internal"
	})
	for _, name := range []string{"rpc.server.call.duration", "rpc.client.call.duration"} {
		if counts[name] != 1 {
			t.Errorf("%s: %d samples with code internal, want 1", name, counts[name])
		}
	}
}

// attrSampler samples every span and records, per span kind, whether the
// attributes given to Start held rpc.method.
type attrSampler struct {
	mu   sync.Mutex
	seen map[trace.SpanKind]bool
}

func (s *attrSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	has := false
	for _, kv := range p.Attributes {
		if kv.Key == fleetotel.RPCMethodKey {
			has = true
		}
	}
	s.mu.Lock()
	s.seen[p.Kind] = has
	s.mu.Unlock()
	return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample}
}

func (s *attrSampler) Description() string { return "attrSampler" }

// TestSamplerAttributes: by default a sampler sees no rpc.* attributes
// (they are set on recording spans after the decision); with
// WithSamplerAttributes it sees them at start. Either way the recorded
// spans carry them.
func TestSamplerAttributes(t *testing.T) {
	for _, atStart := range []bool{false, true} {
		sr := tracetest.NewSpanRecorder()
		smp := &attrSampler{seen: map[trace.SpanKind]bool{}}
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr), sdktrace.WithSampler(smp))
		opts := []fleetotel.Option{fleetotel.WithTracerProvider(tp)}
		if atStart {
			opts = append(opts, fleetotel.WithSamplerAttributes())
		}
		tel := fleetotel.New(opts...)
		srv := server.New(tel.ServerOption())
		if err := srv.RegisterFunction("A", "Do", func(ctx context.Context, in *Req, out *Rep) error { return nil }); err != nil {
			t.Fatal(err)
		}
		addr := testutil.Serve(t, srv)
		c := dial(t, addr, tel.ClientOptionFor(addr))
		if err := c.Call(context.Background(), "A", "Do", &Req{}, &Rep{}); err != nil {
			t.Fatal(err)
		}
		smp.mu.Lock()
		for _, kind := range []trace.SpanKind{trace.SpanKindClient, trace.SpanKindServer} {
			if got, ok := smp.seen[kind]; !ok || got != atStart {
				t.Errorf("WithSamplerAttributes=%v: %s span's sampler saw rpc.method: %v (asked: %v), want %v", atStart, kind, got, ok, atStart)
			}
		}
		smp.mu.Unlock()
		spans := sr.Ended()
		for _, kind := range []trace.SpanKind{trace.SpanKindClient, trace.SpanKindServer} {
			a := attrs(one(t, spans, "A/Do", kind))
			if a["rpc.method"].AsString() != "Do" || a["rpc.service"].AsString() != "A" || a["rpc.system"].AsString() != "fleet" || a["server.address"].AsString() == "" {
				t.Errorf("WithSamplerAttributes=%v: %s span attributes %v", atStart, kind, a)
			}
		}
		tp.Shutdown(context.Background())
	}
}
