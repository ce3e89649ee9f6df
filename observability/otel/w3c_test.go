package fleetotel

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/fleetrpc/fleet"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

var otelW3C = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// TestExtractW3CMatchesPropagators: for well-formed and malformed
// traceparent, tracestate and baggage headers, extractW3C leaves the same
// span context and baggage in the context as the OpenTelemetry
// propagators it stands in for.
func TestExtractW3CMatchesPropagators(t *testing.T) {
	const tid, sid = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	var parents = []string{
		"",
		"00-" + tid + "-" + sid + "-01",
		"00-" + tid + "-" + sid + "-00",
		"00-" + tid + "-" + sid + "-02",
		"00-" + tid + "-" + sid + "-03",
		"00-" + tid + "-" + sid + "-04", // reserved flag in version 00
		"00-" + tid + "-" + sid + "-ff",
		"00-" + tid + "-" + sid + "-01-",
		"00-" + tid + "-" + sid + "-01-x",
		"00-" + tid + "-" + sid + "-01x",
		"01-" + tid + "-" + sid + "-01",
		"01-" + tid + "-" + sid + "-09",
		"01-" + tid + "-" + sid + "-01-future-fields",
		"01-" + tid + "-" + sid + "-01future",
		"fe-" + tid + "-" + sid + "-01",
		"ff-" + tid + "-" + sid + "-01",
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-" + sid + "-01", // upper case
		"00-00000000000000000000000000000000-" + sid + "-01",
		"00-" + tid + "-0000000000000000-01",
		"00-" + tid + "-" + sid + "-1",
		"00-" + tid[1:] + "-" + sid + "-01",
		"00-" + tid + "-" + sid[1:] + "-01",
		"00-" + tid + "x" + sid + "-01",
		"0-" + tid + "-" + sid + "-01",
		"00_" + tid + "-" + sid + "-01",
		"00-" + tid + "-" + sid + "-0g",
		"00-" + tid[:31] + "g-" + sid + "-01",
		"traceparent",
	}
	states := []string{"", "congo=t61rcWkgMzE", "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE", "not a tracestate"}
	bags := []string{"", "tenant=acme", "tenant=acme,region=eu;prop", "=bad"}
	n := 0
	for _, tp := range parents {
		for _, ts := range states {
			for _, bag := range bags {
				md := fleet.Metadata{}
				if tp != "" {
					md[traceparentKey] = tp
				}
				if ts != "" {
					md[tracestateKey] = ts
				}
				if bag != "" {
					md[baggageKey] = bag
				}
				var ci fleet.CallInfo
				ci.SetMetadata(md)
				got := extractW3C(context.Background(), &ci)
				want := otelW3C.Extract(context.Background(), propagation.MapCarrier(md))
				if g, w := trace.SpanContextFromContext(got), trace.SpanContextFromContext(want); !g.Equal(w) {
					t.Errorf("traceparent %q tracestate %q: span context %+v, the propagator's %+v", tp, ts, g, w)
				}
				if g, w := bagMembers(baggage.FromContext(got).String()), bagMembers(baggage.FromContext(want).String()); !slices.Equal(g, w) {
					t.Errorf("baggage %q: %q, the propagator's %q", bag, g, w)
				}
				n++
			}
		}
	}
	t.Logf("%d header combinations", n)
}

// TestInjectW3CMatchesPropagators: for span contexts with every flag
// combination, with and without tracestate, and contexts with and without
// baggage, injectW3C writes the same request metadata as the OpenTelemetry
// propagators, and nothing for an invalid span context without baggage.
func TestInjectW3CMatchesPropagators(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	ts, err := trace.ParseTraceState("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE")
	if err != nil {
		t.Fatal(err)
	}
	bag, err := baggage.Parse("tenant=acme,region=eu;prop")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		var scc trace.SpanContextConfig
		if i%10 != 0 { // every tenth is invalid (zero IDs)
			for j := range scc.TraceID {
				scc.TraceID[j] = byte(r.Uint32())
			}
			for j := range scc.SpanID {
				scc.SpanID[j] = byte(r.Uint32())
			}
		}
		scc.TraceFlags = trace.TraceFlags(r.Uint32() & 0xff)
		if i%3 == 0 {
			scc.TraceState = ts
		}
		sc := trace.NewSpanContext(scc)
		ctx := context.Background()
		if i%4 == 0 {
			ctx = baggage.ContextWithBaggage(ctx, bag)
		}
		want := propagation.MapCarrier{}
		otelW3C.Inject(trace.ContextWithSpanContext(ctx, sc), want)
		got := fleet.OutgoingMetadata(injectW3C(ctx, sc))
		if len(want) == 0 && got == nil {
			continue
		}
		// Baggage members come out in map order; compare them as sets.
		gb, wb := bagMembers(got[baggageKey]), bagMembers(want[baggageKey])
		got, want = maps.Clone(got), maps.Clone(want)
		delete(got, baggageKey)
		delete(want, baggageKey)
		if !maps.Equal(map[string]string(got), map[string]string(want)) || !slices.Equal(gb, wb) {
			t.Errorf("span context %+v: metadata %v, the propagators write %v", sc, got, want)
		}
	}
}

// bagMembers returns a baggage header's members, sorted.
func bagMembers(h string) []string {
	b, _ := baggage.Parse(h)
	var m []string
	for _, mem := range b.Members() {
		m = append(m, mem.String())
	}
	slices.Sort(m)
	return m
}

// TestRemoteParentContext: the trace package's context key was found
// (so extraction takes one allocation), and a context made by
// withRemoteSpanContext reads as one made by
// trace.ContextWithRemoteSpanContext: the same span context, a
// non-recording span with the same kind of tracer provider, the parent's
// other values, and the SDK starts a child of it.
func TestRemoteParentContext(t *testing.T) {
	if spanKey == nil {
		t.Fatal("trace's span key not found; extraction falls back to trace.ContextWithRemoteSpanContext")
	}
	type key struct{}
	parent := context.WithValue(context.Background(), key{}, "v")
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0xa, 1}, SpanID: trace.SpanID{0xb, 2}, TraceFlags: trace.FlagsSampled, Remote: true})
	got, want := withRemoteSpanContext(parent, sc), trace.ContextWithRemoteSpanContext(parent, sc)
	gs, ws := trace.SpanFromContext(got), trace.SpanFromContext(want)
	if !gs.SpanContext().Equal(ws.SpanContext()) || gs.IsRecording() != ws.IsRecording() {
		t.Errorf("span context %+v recording %v, want %+v recording %v", gs.SpanContext(), gs.IsRecording(), ws.SpanContext(), ws.IsRecording())
	}
	if g, w := fmt.Sprintf("%T", gs.TracerProvider()), fmt.Sprintf("%T", ws.TracerProvider()); g != w {
		t.Errorf("tracer provider %s, want %s", g, w)
	}
	if got.Value(key{}) != "v" {
		t.Error("the parent's value is lost")
	}
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	_, child := tp.Tracer("t").Start(got, "child")
	defer child.End()
	if cs := child.SpanContext(); cs.TraceID() != sc.TraceID() || !cs.IsSampled() || cs.SpanID() == sc.SpanID() {
		t.Errorf("child span context %+v of parent %+v", cs, sc)
	}
}
