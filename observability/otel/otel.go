package fleetotel

import (
	"context"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/server"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the tracer and meter.
const ScopeName = "github.com/fleetrpc/fleet/observability/otel"

// System is the value of the rpc.system attribute.
const System = "fleet"

// Attribute keys, from the OpenTelemetry semantic conventions for RPC and
// for network attributes.
const (
	RPCSystemKey             = attribute.Key("rpc.system")
	RPCServiceKey            = attribute.Key("rpc.service")
	RPCMethodKey             = attribute.Key("rpc.method")
	RPCResponseStatusCodeKey = attribute.Key("rpc.response.status_code")
	ErrorTypeKey             = attribute.Key("error.type")
	ServerAddressKey         = attribute.Key("server.address")
	ServerPortKey            = attribute.Key("server.port")
	ClientAddressKey         = attribute.Key("client.address")
	ClientPortKey            = attribute.Key("client.port")
)

// Option configures New.
type Option func(*config)

type config struct {
	tp    trace.TracerProvider
	mp    metric.MeterProvider
	props propagation.TextMapPropagator
}

// WithTracerProvider sets the tracer provider. Default
// otel.GetTracerProvider() at the time New runs.
func WithTracerProvider(tp trace.TracerProvider) Option { return func(c *config) { c.tp = tp } }

// WithMeterProvider sets the meter provider. Default otel.GetMeterProvider()
// at the time New runs.
func WithMeterProvider(mp metric.MeterProvider) Option { return func(c *config) { c.mp = mp } }

// WithPropagators sets how span context and baggage travel in request
// metadata. Default W3C trace context (traceparent, tracestate) plus W3C
// baggage (baggage).
func WithPropagators(p propagation.TextMapPropagator) Option {
	return func(c *config) { c.props = p }
}

// Telemetry makes the interceptors. Make it with New; it is safe for
// concurrent use.
type Telemetry struct {
	tracer    trace.Tracer
	props     propagation.TextMapPropagator
	serverDur metric.Float64Histogram
	clientDur metric.Float64Histogram

	mu    sync.Mutex
	attrs atomic.Pointer[map[akey]*callAttrs] // copy-on-write
}

type akey struct {
	service, method string
	code            fleet.Code
}

// callAttrs are a (service, method, code) triple's precomputed attributes.
type callAttrs struct {
	name    string
	start   []attribute.KeyValue // at span start
	end     []attribute.KeyValue // at span end
	measure metric.MeasurementOption
}

// New returns a Telemetry configured by opts. Making its instruments
// cannot fail with the SDK; an instrument a custom meter refuses is
// replaced by a no-op one.
func New(opts ...Option) *Telemetry {
	var c config
	for _, o := range opts {
		o(&c)
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	if c.props == nil {
		c.props = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	}
	t := &Telemetry{tracer: c.tp.Tracer(ScopeName), props: c.props}
	meter := c.mp.Meter(ScopeName)
	// Bucket boundaries from the semantic conventions' advice for RPC
	// call durations.
	buckets := metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10)
	var err error
	if t.serverDur, err = meter.Float64Histogram("rpc.server.call.duration", metric.WithUnit("s"),
		metric.WithDescription("Measures the duration of inbound remote procedure calls."), buckets); err != nil {
		t.serverDur, _ = noopMeter.Float64Histogram("rpc.server.call.duration")
	}
	if t.clientDur, err = meter.Float64Histogram("rpc.client.call.duration", metric.WithUnit("s"),
		metric.WithDescription("Measures the duration of outbound remote procedure calls."), buckets); err != nil {
		t.clientDur, _ = noopMeter.Float64Histogram("rpc.client.call.duration")
	}
	empty := map[akey]*callAttrs{}
	t.attrs.Store(&empty)
	return t
}

func (t *Telemetry) attrsFor(service, method string, code fleet.Code) *callAttrs {
	k := akey{service, method, code}
	if a := (*t.attrs.Load())[k]; a != nil {
		return a
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	old := *t.attrs.Load()
	if a := old[k]; a != nil {
		return a
	}
	start := []attribute.KeyValue{RPCSystemKey.String(System), RPCServiceKey.String(service), RPCMethodKey.String(method)}
	end := []attribute.KeyValue{RPCResponseStatusCodeKey.String(code.String())}
	if code != fleet.OK {
		end = append(end, ErrorTypeKey.String(code.String()))
	}
	all := append(append([]attribute.KeyValue{}, start...), end[0])
	a := &callAttrs{name: service + "/" + method, start: start, end: end, measure: metric.WithAttributeSet(attribute.NewSet(all...))}
	next := make(map[akey]*callAttrs, len(old)+1)
	for kk, v := range old {
		next[kk] = v
	}
	next[k] = a
	t.attrs.Store(&next)
	return a
}

// ServerInterceptor returns the server interceptor: it continues the
// caller's trace from the request metadata, runs the call under a server
// span and records rpc.server.call.duration.
func (t *Telemetry) ServerInterceptor() server.Interceptor {
	return func(ctx context.Context, info *fleet.CallInfo, args, reply any, next server.Handler) error {
		if len(info.Metadata) > 0 {
			ctx = t.props.Extract(ctx, metadataCarrier(info.Metadata))
		}
		a := t.attrsFor(info.Service, info.Method, fleet.OK)
		attrs := make([]attribute.KeyValue, 0, len(a.start)+4)
		attrs = append(attrs, a.start...)
		attrs = appendAddr(attrs, info.LocalAddr, ServerAddressKey, ServerPortKey)
		attrs = appendAddr(attrs, info.RemoteAddr, ClientAddressKey, ClientPortKey)
		ctx, span := t.tracer.Start(ctx, a.name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
		start := time.Now()
		err := next(ctx, args, reply)
		code := fleet.CodeOf(err)
		ea := t.attrsFor(info.Service, info.Method, code)
		t.serverDur.Record(ctx, time.Since(start).Seconds(), ea.measure)
		span.SetAttributes(ea.end...)
		if serverFault(code) {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
		return err
	}
}

// ServerOption returns the server option that installs ServerInterceptor.
// Interceptors added after it run inside the server span.
func (t *Telemetry) ServerOption() server.Option {
	return server.WithInterceptor(t.ServerInterceptor())
}

// ClientInterceptor returns the client interceptor: it runs the call under
// a client span, writes the trace context and baggage into the request
// metadata, and records rpc.client.call.duration.
func (t *Telemetry) ClientInterceptor() client.Interceptor { return t.clientInterceptor(nil) }

// ClientInterceptorFor is ClientInterceptor for a client of the server at
// addr ("host:port", as passed to client.Dial): its spans also carry
// server.address and server.port. A client interceptor is not told which
// connection it runs on, so this is the way to add them for one Client.
func (t *Telemetry) ClientInterceptorFor(addr string) client.Interceptor {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return t.clientInterceptor([]attribute.KeyValue{ServerAddressKey.String(addr)})
	}
	kv := []attribute.KeyValue{ServerAddressKey.String(host)}
	if p, err := strconv.Atoi(port); err == nil {
		kv = append(kv, ServerPortKey.Int(p))
	}
	return t.clientInterceptor(kv)
}

func (t *Telemetry) clientInterceptor(server []attribute.KeyValue) client.Interceptor {
	return func(ctx context.Context, service, method string, args, reply any, invoke client.Invoker) error {
		a := t.attrsFor(service, method, fleet.OK)
		opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(a.start...)}
		if server != nil {
			opts = append(opts, trace.WithAttributes(server...))
		}
		ctx, span := t.tracer.Start(ctx, a.name, opts...)
		md := make(fleet.Metadata, 3)
		t.props.Inject(ctx, metadataCarrier(md))
		if len(md) > 0 {
			ctx = fleet.WithOutgoingMetadata(ctx, md)
		}
		start := time.Now()
		err := invoke(ctx, service, method, args, reply)
		code := fleet.CodeOf(err)
		ea := t.attrsFor(service, method, code)
		t.clientDur.Record(ctx, time.Since(start).Seconds(), ea.measure)
		span.SetAttributes(ea.end...)
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
		return err
	}
}

// ClientOption returns the client option that installs ClientInterceptor.
func (t *Telemetry) ClientOption() client.Option {
	return client.WithInterceptor(t.ClientInterceptor())
}

// ClientOptionFor returns the client option that installs
// ClientInterceptorFor(addr): pass it to client.Dial with the same addr.
func (t *Telemetry) ClientOptionFor(addr string) client.Option {
	return client.WithInterceptor(t.ClientInterceptorFor(addr))
}

// XClientOption returns the XClient option that installs ClientInterceptor
// on every connection the XClient opens: one client span per attempt.
func (t *Telemetry) XClientOption() client.XOption {
	return client.WithClientOptions(t.ClientOption())
}

// serverFault reports whether code marks a server span as failed: the
// codes the RPC conventions list for gRPC server errors, plus Fleet's
// ShuttingDown (gRPC's Unavailable).
func serverFault(code fleet.Code) bool {
	switch code {
	case fleet.Unknown, fleet.DeadlineExceeded, fleet.Unimplemented, fleet.Internal,
		fleet.Unavailable, fleet.DataLoss, fleet.ShuttingDown:
		return true
	}
	return false
}

// appendAddr appends addr's host and port under the two keys.
func appendAddr(attrs []attribute.KeyValue, addr net.Addr, hostKey, portKey attribute.Key) []attribute.KeyValue {
	if addr == nil {
		return attrs
	}
	if tcp, ok := addr.(*net.TCPAddr); ok {
		return append(attrs, hostKey.String(tcp.IP.String()), portKey.Int(tcp.Port))
	}
	s := addr.String()
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return append(attrs, hostKey.String(s)) // a Unix socket path
	}
	attrs = append(attrs, hostKey.String(host))
	if p, err := strconv.Atoi(port); err == nil {
		attrs = append(attrs, portKey.Int(p))
	}
	return attrs
}

// metadataCarrier adapts fleet.Metadata to propagation.TextMapCarrier.
// The W3C header names are lower case, as Fleet metadata keys are
// case-sensitive.
type metadataCarrier fleet.Metadata

func (m metadataCarrier) Get(key string) string { return m[key] }
func (m metadataCarrier) Set(key, value string) { m[key] = value }
func (m metadataCarrier) Keys() []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}
