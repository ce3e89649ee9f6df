package fleetotel_test

import (
	"context"
	"go.opentelemetry.io/otel/attribute"
	"sync"
	"testing"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/internal/testutil"
	fleetotel "github.com/fleetrpc/fleet/observability/otel"
	"github.com/fleetrpc/fleet/server"
	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// HopRep is what the last handler of a chain saw.
type HopRep struct {
	Traceparent string // the request's traceparent
	Recording   bool   // whether the handler's span records
}

// TestParentBasedSampling: with WithParentBasedSampling and a ParentBased
// sampler, a chain caller → Front.Do → Back.Do over real connections
// records no span for a trace whose caller is not sampled, yet passes the
// trace (ID and unsampled flag) on to Back; records every span of a
// sampled trace, each the child of the one before; and leaves roots (a
// caller without a span, a caller without the interceptor) to the
// sampler. The duration metrics count every call.
func TestParentBasedSampling(t *testing.T) {
	rec, reader, tel := recordedTelemetry(t, fleetotel.WithParentBasedSampling())

	back := server.New(tel.ServerOption())
	if err := back.RegisterFunction("Back", "Do", func(ctx context.Context, in *Req, out *HopRep) error {
		tp, _ := fleet.CallInfoFrom(ctx).MetadataValue("traceparent")
		*out = HopRep{Traceparent: tp, Recording: trace.SpanFromContext(ctx).IsRecording()}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	toBack := dial(t, testutil.Serve(t, back), tel.ClientOption())
	front := server.New(tel.ServerOption())
	if err := front.RegisterFunction("Front", "Do", func(ctx context.Context, in *Req, out *HopRep) error {
		if trace.SpanFromContext(ctx).IsRecording() != (in.N == 1) {
			t.Errorf("front span recording %v, want %v", trace.SpanFromContext(ctx).IsRecording(), in.N == 1)
		}
		return toBack.Call(ctx, "Back", "Do", in, out)
	}); err != nil {
		t.Fatal(err)
	}
	frontAddr := testutil.Serve(t, front)
	traced, plain := dial(t, frontAddr, tel.ClientOption()), dial(t, frontAddr)

	tid, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	sid, _ := trace.SpanIDFromHex("b7ad6b7169203331")
	parent := func(flags trace.TraceFlags) context.Context {
		return trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: tid, SpanID: sid, TraceFlags: flags, Remote: true}))
	}
	calls := 0
	call := func(ctx context.Context, c interface {
		Call(context.Context, string, string, any, any) error
	}, sampled bool) HopRep {
		t.Helper()
		calls++
		n := 0
		if sampled {
			n = 1
		}
		var out HopRep
		if err := c.Call(ctx, "Front", "Do", &Req{N: n}, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}

	// Unsampled caller: no span anywhere, the trace context goes through
	// with the caller's span as parent.
	got := call(parent(0), traced, false)
	if want := "00-" + tid.String() + "-" + sid.String() + "-00"; got.Traceparent != want || got.Recording {
		t.Errorf("unsampled: Back saw traceparent %q, recording %v; want %q, not recording", got.Traceparent, got.Recording, want)
	}
	if n := len(rec.Ended()); n != 0 {
		t.Errorf("unsampled: %d spans recorded, want 0", n)
	}

	// Sampled caller: four spans, each the child of the one before.
	got = call(parent(trace.FlagsSampled), traced, true)
	if !got.Recording {
		t.Error("sampled: Back's span does not record")
	}
	spans := rec.Ended()
	if len(spans) != 4 {
		t.Fatalf("sampled: %d spans recorded, want 4", len(spans))
	}
	chain := []struct {
		name string
		kind trace.SpanKind
	}{{"Front/Do", trace.SpanKindClient}, {"Front/Do", trace.SpanKindServer}, {"Back/Do", trace.SpanKindClient}, {"Back/Do", trace.SpanKindServer}}
	up := sid
	for _, hop := range chain {
		s := one(t, spans, hop.name, hop.kind)
		if s.SpanContext().TraceID() != tid || s.Parent().SpanID() != up {
			t.Errorf("sampled: %s %s span: trace %s parent %s, want trace %s parent %s",
				hop.kind, hop.name, s.SpanContext().TraceID(), s.Parent().SpanID(), tid, up)
		}
		up = s.SpanContext().SpanID()
	}

	// Roots: the sampler (AlwaysSample) decides; a new trace each time.
	got = call(context.Background(), traced, true)
	if !got.Recording {
		t.Error("root at the client: Back's span does not record")
	}
	got = call(context.Background(), plain, true)
	if !got.Recording {
		t.Error("root at the server: Back's span does not record")
	}
	if n := len(rec.Ended()); n != 4+4+3 {
		t.Errorf("%d spans recorded, want 11 (4 sampled, 4 and 3 of the roots)", n)
	}

	counts := durationCounts(t, reader, nil)
	// Each call is two server calls (Front, Back); the client interceptor
	// runs on all but the plain client's call.
	if counts["rpc.server.call.duration"] != uint64(2*calls) || counts["rpc.client.call.duration"] != uint64(2*calls-1) {
		t.Errorf("duration samples: server %d, client %d; want %d and %d",
			counts["rpc.server.call.duration"], counts["rpc.client.call.duration"], 2*calls, 2*calls-1)
	}
}

// globalMeter is the meter provider TestGlobalMeterProviderSetLater sets
// as the global one, once per test binary (the global provider delegates
// to the first one set).
var globalMeter = sync.OnceValue(func() *sdkmetric.ManualReader {
	reader := sdkmetric.NewManualReader()
	otel.SetMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	return reader
})

// TestGlobalMeterProviderSetLater: a Telemetry made with the global meter
// provider before the program sets one records call durations once it
// is set (the interceptors ask the histograms whether they are enabled
// on every call, and skip the clock reads only while they are not).
func TestGlobalMeterProviderSetLater(t *testing.T) {
	tel := fleetotel.New(fleetotel.WithTracerProvider(sdktrace.NewTracerProvider()))
	srv := server.New(tel.ServerOption())
	if err := srv.RegisterFunction("G", "Do", func(ctx context.Context, in *Req, out *Rep) error { return nil }); err != nil {
		t.Fatal(err)
	}
	c := dial(t, testutil.Serve(t, srv), tel.ClientOption())
	var out Rep
	// Before the provider is set (on the first run): not measured.
	if err := c.Call(context.Background(), "G", "Do", &Req{}, &out); err != nil {
		t.Fatal(err)
	}
	reader := globalMeter()
	before := durationCounts(t, reader, nil)
	if err := c.Call(context.Background(), "G", "Do", &Req{}, &out); err != nil {
		t.Fatal(err)
	}
	after := durationCounts(t, reader, nil)
	for _, name := range []string{"rpc.server.call.duration", "rpc.client.call.duration"} {
		if n := after[name] - before[name]; n != 1 {
			t.Errorf("%s: %d samples of the call after the provider was set, want 1", name, n)
		}
	}
}

// durationCounts returns the number of samples of each float64
// histogram (the call-duration metrics) in the data points keep accepts
// (nil: all), and checks that each such histogram is in seconds.
func durationCounts(t *testing.T, reader *sdkmetric.ManualReader, keep func(attribute.Set) bool) map[string]uint64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			h, ok := m.Data.(metricdata.Histogram[float64])
			if !ok {
				continue
			}
			if m.Unit != "s" {
				t.Errorf("%s unit %q, want s", m.Name, m.Unit)
			}
			for _, dp := range h.DataPoints {
				if keep == nil || keep(dp.Attributes) {
					counts[m.Name] += dp.Count
				}
			}
		}
	}
	return counts
}

// recordedTelemetry returns a Telemetry whose tracer samples
// ParentBased(AlwaysSample) into the returned recorder and whose meter
// provider is read by the returned manual reader; opts follow. The
// providers shut down when t ends.
func recordedTelemetry(t *testing.T, opts ...fleetotel.Option) (*tracetest.SpanRecorder, *sdkmetric.ManualReader, *fleetotel.Telemetry) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	all := []fleetotel.Option{fleetotel.WithTracerProvider(tp), fleetotel.WithMeterProvider(mp)}
	return rec, reader, fleetotel.New(append(all, opts...)...)
}
