package fleetotel

import (
	"context"

	"github.com/fleetrpc/fleet"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The interceptors write and read the default propagators' headers (W3C
// Trace Context, https://www.w3.org/TR/trace-context/, and W3C Baggage)
// themselves when New was given no WithPropagators: the same headers, with
// the same rules as propagation.TraceContext and propagation.Baggage
// (tested against them), without the carrier, the propagator's
// string builder and the interface calls per header.

// Header names, lower case as Fleet metadata keys are case-sensitive.
const (
	traceparentKey = "traceparent"
	tracestateKey  = "tracestate"
	baggageKey     = "baggage"
)

// traceparentLen is the length of a version 00 traceparent:
// "00-" 32 hex digits "-" 16 hex digits "-" 2 hex digits.
const traceparentLen = 55

const hexDigits = "0123456789abcdef"

func appendHex(dst []byte, src []byte) []byte {
	for _, c := range src {
		dst = append(dst, hexDigits[c>>4], hexDigits[c&0xf])
	}
	return dst
}

// appendTraceparent appends sc's traceparent header (version 00) to b.
// Only the flags the specification defines (sampled, random) are written.
func appendTraceparent(b []byte, sc trace.SpanContext) []byte {
	tid, sid := sc.TraceID(), sc.SpanID()
	b = append(b, '0', '0', '-')
	b = appendHex(b, tid[:])
	b = append(b, '-')
	b = appendHex(b, sid[:])
	b = append(b, '-')
	return appendHex(b, []byte{byte(sc.TraceFlags() & (trace.FlagsSampled | trace.FlagsRandom))})
}

// injectW3C returns ctx with sc's trace context and ctx's baggage appended
// to the outgoing request metadata, as propagation.TraceContext and
// propagation.Baggage would write them: traceparent and tracestate only
// when sc is valid, tracestate and baggage only when not empty. The
// common case, a traceparent alone, takes one allocation
// (fleet.AppendOutgoingValue writes the header into the context's own).
func injectW3C(ctx context.Context, sc trace.SpanContext) context.Context {
	var ts, bag string
	valid := sc.IsValid()
	if valid && sc.TraceState().Len() > 0 {
		ts = sc.TraceState().String()
	}
	if b := baggage.FromContext(ctx); b.Len() > 0 {
		bag = b.String()
	}
	if ts == "" && bag == "" {
		if !valid {
			return ctx
		}
		return fleet.AppendOutgoingValue(ctx, traceparentKey, func(b []byte) []byte { return appendTraceparent(b, sc) })
	}
	kv := make([]string, 0, 6)
	if valid {
		kv = append(kv, traceparentKey, string(appendTraceparent(make([]byte, 0, traceparentLen), sc)))
		if ts != "" {
			kv = append(kv, tracestateKey, ts)
		}
	}
	if bag != "" {
		kv = append(kv, baggageKey, bag)
	}
	return fleet.AppendOutgoingMetadata(ctx, kv...)
}

// extractW3C returns ctx with the caller's trace context (as the remote
// span context) and baggage from the request metadata, as
// propagation.TraceContext and propagation.Baggage extract them: an
// invalid traceparent is ignored, a tracestate that does not parse is
// dropped without dropping the traceparent.
func extractW3C(ctx context.Context, info *fleet.CallInfo) context.Context {
	if h, ok := info.MetadataValue(traceparentKey); ok {
		if scc, ok := parseTraceparent(h); ok {
			if ts, ok := info.MetadataValue(tracestateKey); ok && ts != "" {
				scc.TraceState, _ = trace.ParseTraceState(ts)
			}
			scc.Remote = true
			if sc := trace.NewSpanContext(scc); sc.IsValid() {
				ctx = withRemoteSpanContext(ctx, sc)
			}
		}
	}
	if b, ok := info.MetadataValue(baggageKey); ok && b != "" {
		ctx = propagation.Baggage{}.Extract(ctx, infoCarrier{info})
	}
	return ctx
}

// unhex maps each lower-case hex digit to its value and every other
// byte to 0xff.
var unhex = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for i, c := range hexDigits {
		t[c] = byte(i)
	}
	return t
}()

// decodeHex decodes the lower-case hex digits of s (len(dst)*2 of them)
// into dst; false if s holds anything else.
func decodeHex(dst []byte, s string) bool {
	if len(s) != 2*len(dst) {
		return false
	}
	var bad byte
	for i := range dst {
		hi, lo := unhex[s[2*i]], unhex[s[2*i+1]]
		dst[i] = hi<<4 | lo
		bad |= hi | lo
	}
	return bad&0xf0 == 0
}

// parseTraceparent parses a traceparent header by the rules
// propagation.TraceContext applies: version, trace ID, span ID and flags
// as lower-case hex fields of 2, 32, 16 and 2 digits separated by '-';
// version ff is invalid; version 00 allows nothing after the flags and no
// flag bits beyond sampled and random; a later version may have more
// fields after a '-'. Only the sampled and random flags are kept. The
// all-zero IDs are left for trace.NewSpanContext's validity check.
func parseTraceparent(h string) (trace.SpanContextConfig, bool) {
	var scc trace.SpanContextConfig
	if len(h) < traceparentLen || h[2] != '-' || h[35] != '-' || h[52] != '-' {
		return scc, false
	}
	var ver, flags [1]byte
	if !decodeHex(ver[:], h[:2]) || ver[0] == 0xff ||
		!decodeHex(scc.TraceID[:], h[3:35]) ||
		!decodeHex(scc.SpanID[:], h[36:52]) ||
		!decodeHex(flags[:], h[53:55]) {
		return scc, false
	}
	rest := h[55:]
	if rest != "" {
		if rest[0] != '-' {
			return scc, false
		}
		rest = rest[1:] // a lone trailing '-' counts as nothing after the flags
	}
	if ver[0] == 0 && (rest != "" || flags[0] > 3) {
		return scc, false
	}
	scc.TraceFlags = trace.TraceFlags(flags[0]) & (trace.FlagsSampled | trace.FlagsRandom)
	return scc, true
}

// unsampledParent reports whether ctx carries a valid span context that
// is not sampled: the parent WithParentBasedSampling lets the
// interceptors skip the tracer for.
func unsampledParent(ctx context.Context) bool {
	sc := trace.SpanContextFromContext(ctx)
	return sc.IsValid() && !sc.IsSampled()
}

// withRemoteSpanContext is trace.ContextWithRemoteSpanContext(ctx, sc) (sc
// is remote) in one allocation instead of two (the span and the context):
// a remoteParentCtx answers trace's context key with a pointer into
// itself. It falls back to trace.ContextWithRemoteSpanContext when
// spanKey could not be found.
func withRemoteSpanContext(ctx context.Context, sc trace.SpanContext) context.Context {
	if spanKey == nil {
		return trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	c := &remoteParentCtx{Context: ctx}
	c.span.Span, c.span.sc = noopSpan, sc
	return c
}

// remoteParentCtx is a context whose current span is span.
type remoteParentCtx struct {
	context.Context
	span remoteSpan
}

func (c *remoteParentCtx) Value(key any) any {
	if key == spanKey {
		return &c.span
	}
	return c.Context.Value(key)
}

func (c *remoteParentCtx) String() string {
	if s, ok := c.Context.(interface{ String() string }); ok {
		return s.String() + ".WithRemoteSpanContext"
	}
	return "context.WithRemoteSpanContext"
}

// remoteSpan is a non-recording span of a remote span context: what
// trace.ContextWithRemoteSpanContext stores. It is the API's no-op span
// (embedded, so TracerProvider and the other methods are that span's)
// with sc as its span context.
type remoteSpan struct {
	trace.Span
	sc trace.SpanContext
}

func (s *remoteSpan) SpanContext() trace.SpanContext { return s.sc }

// noopSpan is the API's no-op span, which trace.SpanFromContext returns for
// a context without a span.
var noopSpan = trace.SpanFromContext(context.Background())

// spanKey is the key under which package trace keeps a context's current
// span (unexported there), found by letting trace.SpanFromContext look it
// up in a keyProbe. init sets it to nil unless trace then finds a
// remoteParentCtx's span, and withRemoteSpanContext then does what trace
// does.
var spanKey = probeSpanKey()

func probeSpanKey() any {
	var p keyProbe
	trace.SpanFromContext(&p)
	if p.n != 1 {
		return nil
	}
	return p.key
}

func init() {
	if spanKey == nil {
		return
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, Remote: true})
	type other struct{}
	ctx := withRemoteSpanContext(context.WithValue(context.Background(), other{}, 1), sc)
	if s := trace.SpanFromContext(ctx); !s.SpanContext().Equal(sc) || s.IsRecording() || ctx.Value(other{}) != 1 {
		spanKey = nil
	}
}

// keyProbe records the key a lookup asks it for and how many it asked.
type keyProbe struct {
	context.Context
	key any
	n   int
}

func (p *keyProbe) Value(key any) any {
	p.key = key
	p.n++
	return nil
}
