package fleetotel

import (
	"context"
	"io"
	"net"
	"slices"
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
	// RPCMessageTypeKey and RPCMessageIDKey are the attributes of a
	// stream's rpc.message events: SENT or RECEIVED, and the message's
	// number, counted from 1 for each direction.
	RPCMessageTypeKey = attribute.Key("rpc.message.type")
	RPCMessageIDKey   = attribute.Key("rpc.message.id")
	// RouteKey is Fleet's attribute for the route a call came by
	// (fleet.Route: native, grpc, http, jsonrpc, inprocess), on server
	// spans and the server's metrics.
	RouteKey = attribute.Key("fleet.route")
)

// MessageEvent is the name of a stream message's span event, from the
// RPC semantic conventions.
const MessageEvent = "rpc.message"

// Option configures New.
type Option func(*config)

type config struct {
	tp            trace.TracerProvider
	mp            metric.MeterProvider
	props         propagation.TextMapPropagator
	samplerAttrs  bool
	skipUnsampled bool
}

// WithParentBasedSampling declares that the tracer provider's sampler
// records no span whose parent is valid and not sampled: the SDK's
// sdktrace.ParentBased sampler with its defaults for such parents
// (remoteParentNotSampled and localParentNotSampled AlwaysOff), whatever
// its root sampler. The interceptors then start no span for a call whose
// parent (the caller's trace context on the server, the span in the call's
// context on the client) is valid and not sampled, since the tracer would
// only have made a non-recording span, and save the tracer's cost
// (allocations, the sampler, a new span ID). Calls without a parent, and
// calls with a sampled parent, go to the tracer as before: the sampler
// still decides for every root and every sampled trace.
//
// What such a call looks like then: the handler's context (server) and the
// call's context (client) carry the parent's span context instead of a
// new non-recording span's, so the trace context sent on to downstream
// calls names that parent (an unrecorded span as well) as the parent
// span ID; trace ID, sampled flag, tracestate and baggage travel as
// before. trace.SpanFromContext in the handler returns a non-recording span
// with the caller's span context (IsRemote true) instead of one the SDK
// made. The duration metrics are recorded for every call either way.
//
// Default off: with another sampler (one that may record a child of an
// unsampled parent) the option would drop spans it would have recorded.
func WithParentBasedSampling() Option { return func(c *config) { c.skipUnsampled = true } }

// WithSamplerAttributes passes a span's rpc.* attributes (and, on the
// client, server.address and server.port) to the tracer's Start, so that a
// sampler can decide on them. Default off: a sampler sees the span's name
// ("Service/Method") and kind, and the attributes are set once the span is
// known to be recording, because handing them to Start makes the SDK copy
// them on every call, sampled or not.
func WithSamplerAttributes() Option { return func(c *config) { c.samplerAttrs = true } }

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
	tracer        trace.Tracer
	samplerAttrs  bool
	skipUnsampled bool // WithParentBasedSampling
	props         propagation.TextMapPropagator
	serverDur     metric.Float64Histogram
	clientDur     metric.Float64Histogram
	// serverReqs and serverResps are the messages received and sent per
	// server stream (rpc.server.requests_per_rpc and
	// rpc.server.responses_per_rpc).
	serverReqs, serverResps metric.Int64Histogram

	methods table[*methodTel]
}

// methodTel is one (service, method)'s precomputed span name, attributes
// and span start options, made once on the method's first call so a call
// allocates none of them.
type methodTel struct {
	service, method string
	name            string                                           // "Service/Method"
	start           []attribute.KeyValue                             // rpc.system, rpc.service, rpc.method
	serverStart     []trace.SpanStartOption                          // kind, and the attributes WithSamplerAttributes
	serverLate      []attribute.KeyValue                             // attributes set on recording spans after Start
	ends            [fleet.ShuttingDown + 1]atomic.Pointer[endAttrs] // by code

	// The server's telemetry of the method is one methodTel per route,
	// its start attributes with fleet.route added: route is that route,
	// and routes (on the method's methodTel) holds them, copy-on-write.
	route  fleet.Route
	routes atomic.Pointer[[]*methodTel]
	mu     sync.Mutex // serialises writers of routes
	// msgAttrs is the stream message counts' attribute set (server,
	// per route): the start attributes.
	msgAttrs []metric.RecordOption
}

// endAttrs are a method's attributes for one outcome code.
type endAttrs struct {
	end    []attribute.KeyValue  // at span end: status code, error type
	record []metric.RecordOption // the attribute set of the duration, as a slice so Record does not allocate one per call
}

// epoch anchors the monotonic clock reads of call durations:
// time.Since(epoch) reads the monotonic clock only, where time.Now also
// reads the wall clock.
var epoch = time.Now()

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
	t := &Telemetry{tracer: c.tp.Tracer(ScopeName), props: c.props,
		samplerAttrs: c.samplerAttrs, skipUnsampled: c.skipUnsampled}
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
	if t.serverReqs, err = meter.Int64Histogram("rpc.server.requests_per_rpc", metric.WithUnit("{count}"),
		metric.WithDescription("Measures the number of messages received per RPC: recorded for streams.")); err != nil {
		t.serverReqs, _ = noopMeter.Int64Histogram("rpc.server.requests_per_rpc")
	}
	if t.serverResps, err = meter.Int64Histogram("rpc.server.responses_per_rpc", metric.WithUnit("{count}"),
		metric.WithDescription("Measures the number of messages sent per RPC: recorded for streams.")); err != nil {
		t.serverResps, _ = noopMeter.Int64Histogram("rpc.server.responses_per_rpc")
	}
	return t
}

// method returns service.method's precomputed attributes.
func (t *Telemetry) method(service, method string) *methodTel {
	return t.methods.get(service, method, func() *methodTel {
		start := []attribute.KeyValue{RPCSystemKey.String(System), RPCServiceKey.String(service), RPCMethodKey.String(method)}
		return t.newMethodTel(service, method, start)
	})
}

func (t *Telemetry) newMethodTel(service, method string, start []attribute.KeyValue) *methodTel {
	m := &methodTel{
		service: service, method: method,
		name:        service + "/" + method,
		start:       start,
		serverStart: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)},
		msgAttrs:    []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(start...))},
	}
	if t.samplerAttrs {
		m.serverStart = append(m.serverStart, trace.WithAttributes(start...))
	} else {
		m.serverLate = start
	}
	return m
}

// serverMethod returns the server's precomputed attributes of the call's
// method and route, made on first use. The routes are the few the server
// and gateway set, so a method has few entries.
func (t *Telemetry) serverMethod(info *fleet.CallInfo) *methodTel {
	base := t.method(info.Service, info.Method)
	if p := base.routes.Load(); p != nil {
		for _, m := range *p {
			if m.route == info.Route {
				return m
			}
		}
	}
	base.mu.Lock()
	defer base.mu.Unlock()
	var old []*methodTel
	if p := base.routes.Load(); p != nil {
		old = *p
		for _, m := range old {
			if m.route == info.Route {
				return m
			}
		}
	}
	start := append(append([]attribute.KeyValue{}, base.start...), RouteKey.String(string(info.Route)))
	m := t.newMethodTel(info.Service, info.Method, start)
	m.route = info.Route
	next := append(append(make([]*methodTel, 0, len(old)+1), old...), m)
	base.routes.Store(&next)
	return m
}

// is reports whether m is the server telemetry of service.method on
// route.
func (m *methodTel) is(service, method string, route fleet.Route) bool {
	return m.route == route && m.method == method && m.service == service
}

// endFor returns the method's attributes for code, made on first use.
func (m *methodTel) endFor(code fleet.Code) *endAttrs {
	if int(code) < len(m.ends) {
		if a := m.ends[code].Load(); a != nil {
			return a
		}
	}
	end := []attribute.KeyValue{RPCResponseStatusCodeKey.String(code.String())}
	if code != fleet.OK {
		end = append(end, ErrorTypeKey.String(code.String()))
	}
	all := append(append([]attribute.KeyValue{}, m.start...), end[0])
	a := &endAttrs{end: end, record: []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(all...))}}
	if int(code) < len(m.ends) {
		// Two first calls may both make it; either result is the same.
		m.ends[code].Store(a)
	}
	return a
}

// ServerInterceptor returns the server interceptor: it continues the
// caller's trace from the request metadata, runs each call and each stream
// under a server span and records rpc.server.call.duration, with the
// call's route as fleet.route. On a stream's span each message the handler
// sends or receives is an rpc.message event (rpc.message.type SENT or
// RECEIVED, rpc.message.id counting from 1 each way), and the stream's
// message counts go to rpc.server.requests_per_rpc and
// rpc.server.responses_per_rpc.
//
// The method's attributes are built once per method and route; they, the
// address attributes, the events and the outcome are added only when the
// sampler made the span recording (see WithSamplerAttributes), so an
// unsampled call costs the span's start and end and the duration
// measurement.
func (t *Telemetry) ServerInterceptor() server.Interceptor { return (*serverInterceptor)(t) }

type serverInterceptor Telemetry

// serverCall is one call's or stream's span and clock.
type serverCall struct {
	m         *methodTel
	span      trace.Span // nil: no span (WithParentBasedSampling, unsampled parent)
	recording bool
	measure   bool
	start     time.Duration
}

// begin starts a call's span and clock; ctx is the context to pass on.
func (t *Telemetry) begin(ctx context.Context, info *fleet.CallInfo) (context.Context, serverCall) {
	return t.beginWith(ctx, info, t.serverMethod(info))
}

// beginWith is begin with the method's telemetry m already found.
func (t *Telemetry) beginWith(ctx context.Context, info *fleet.CallInfo, m *methodTel) (context.Context, serverCall) {
	if info.MetadataLen() > 0 {
		ctx = t.props.Extract(ctx, infoCarrier{info})
	}
	sc := serverCall{m: m}
	if !t.skipUnsampled || !unsampledParent(ctx) {
		ctx, sc.span = t.tracer.Start(ctx, sc.m.name, sc.m.serverStart...)
		sc.recording = sc.span.IsRecording()
	}
	if sc.recording {
		var buf [8]attribute.KeyValue
		addrs := append(buf[:0], sc.m.serverLate...)
		addrs = appendAddr(addrs, info.LocalAddr, ServerAddressKey, ServerPortKey)
		addrs = appendAddr(addrs, info.RemoteAddr, ClientAddressKey, ClientPortKey)
		sc.span.SetAttributes(addrs...)
	}
	// Without a meter provider (the global no-op one, say) the
	// histogram is disabled: no clock reads then.
	sc.measure = t.serverDur.Enabled(ctx)
	if sc.measure {
		sc.start = time.Since(epoch)
	}
	return ctx, sc
}

// end records the outcome err and ends the span.
func (t *Telemetry) end(ctx context.Context, sc *serverCall, err error) {
	code := fleet.CodeOf(err)
	ea := sc.m.endFor(code)
	if sc.measure {
		t.serverDur.Record(ctx, (time.Since(epoch) - sc.start).Seconds(), ea.record...)
	}
	if sc.recording {
		sc.span.SetAttributes(ea.end...)
		if serverFault(code) {
			sc.span.SetStatus(codes.Error, err.Error())
		}
	}
	if sc.span != nil {
		sc.span.End()
	}
}

// WrapUnary runs each call under a server span.
func (i *serverInterceptor) WrapUnary(next server.UnaryFunc) server.UnaryFunc {
	t := (*Telemetry)(i)
	// The server builds a chain per method, so its calls all find the
	// telemetry the first one found (for one route; other routes look
	// theirs up): a load and a comparison instead of the table's map
	// reads.
	var first atomic.Pointer[methodTel]
	return func(ctx context.Context, info *fleet.CallInfo, args, reply any) error {
		m := first.Load()
		if m == nil || !m.is(info.Service, info.Method, info.Route) {
			m = t.serverMethod(info)
			first.CompareAndSwap(nil, m)
		}
		ctx, sc := t.beginWith(ctx, info, m)
		err := next(ctx, info, args, reply)
		t.end(ctx, &sc, err)
		return err
	}
}

// WrapStream runs each stream under a server span, with its messages as
// events and their counts recorded at its end.
func (i *serverInterceptor) WrapStream(next server.StreamFunc) server.StreamFunc {
	t := (*Telemetry)(i)
	return func(ctx context.Context, info *fleet.CallInfo, st server.Stream) error {
		ctx, sc := t.begin(ctx, info)
		ts := &tracedStream{Stream: st}
		if sc.recording {
			ts.span = sc.span
		}
		err := next(ctx, info, ts)
		if t.serverReqs.Enabled(ctx) {
			t.serverReqs.Record(ctx, ts.received.Load(), sc.m.msgAttrs...)
		}
		if t.serverResps.Enabled(ctx) {
			t.serverResps.Record(ctx, ts.sent.Load(), sc.m.msgAttrs...)
		}
		t.end(ctx, &sc, err)
		return err
	}
}

// tracedStream counts a stream's messages and, on a recording span, adds
// an rpc.message event for each. Send and Receive may run on two
// goroutines at once (a bidi handler's), hence the atomic counters; the
// span is safe for concurrent use.
type tracedStream struct {
	server.Stream
	msgEvents
}

// msgEvents counts a stream's messages each way and adds their events to
// a recording span.
type msgEvents struct {
	span           trace.Span // nil: not recording
	sent, received atomic.Int64
}

var (
	sentAttr     = RPCMessageTypeKey.String("SENT")
	receivedAttr = RPCMessageTypeKey.String("RECEIVED")
)

func (s *tracedStream) Send(msg any) error {
	err := s.Stream.Send(msg)
	if err == nil {
		s.event(&s.sent, sentAttr)
	}
	return err
}

func (s *tracedStream) Receive(msg any) error {
	err := s.Stream.Receive(msg)
	if err == nil {
		s.event(&s.received, receivedAttr)
	}
	return err
}

// event counts one message in n and adds its event to a recording span.
func (s *msgEvents) event(n *atomic.Int64, typ attribute.KeyValue) {
	id := n.Add(1)
	if s.span != nil {
		s.span.AddEvent(MessageEvent, trace.WithAttributes(typ, RPCMessageIDKey.Int64(id)))
	}
}

// ServerOption returns the server option that installs ServerInterceptor.
// Interceptors added after it run inside the server span.
func (t *Telemetry) ServerOption() server.Option {
	return server.WithInterceptor(t.ServerInterceptor())
}

// ClientInterceptor returns the client interceptor: it runs each call and
// each stream under a client span, writes the trace context and baggage
// into the request metadata, and records rpc.client.call.duration. A
// stream's span lasts from its open to its end (the first Receive that
// fails, io.EOF meaning ok, or else its Close, code canceled) and has an
// rpc.message event for each message, as on the server.
//
// The span's start options are built once per method; the outcome is
// added only to recording spans. The trace context is written whether or
// not the span is sampled: the server's sampler needs the caller's
// decision (W3C trace-flags) to keep the trace whole.
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

// clientMethod is one method's span start options for one client
// interceptor (they include that interceptor's server address).
type clientMethod struct {
	m    *methodTel
	opts []trace.SpanStartOption // kind, and the attributes WithSamplerAttributes
	late []attribute.KeyValue    // attributes set on recording spans after Start
}

func (t *Telemetry) clientInterceptor(server []attribute.KeyValue) client.Interceptor {
	return &clientInterceptor{t: t, server: server}
}

// clientInterceptor is one client interceptor: its server address
// attributes and its methods' span start options.
type clientInterceptor struct {
	t       *Telemetry
	server  []attribute.KeyValue
	methods table[*clientMethod]
}

// method returns service.method's span start options.
func (ci *clientInterceptor) method(service, method string) *clientMethod {
	t := ci.t
	return ci.methods.get(service, method, func() *clientMethod {
		m := t.method(service, method)
		attrs := append(append([]attribute.KeyValue{}, m.start...), ci.server...)
		cm := &clientMethod{m: m, opts: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}}
		if t.samplerAttrs {
			cm.opts = append(cm.opts, trace.WithAttributes(attrs...))
		} else {
			cm.late = attrs
		}
		return cm
	})
}

// clientCall is one client call's or stream's span and clock.
type clientCall struct {
	m         *clientMethod
	span      trace.Span // nil: no span (WithParentBasedSampling, unsampled parent)
	recording bool
	measure   bool
	start     time.Duration
}

// begin starts the span of a call or stream and writes the trace context
// into the outgoing metadata; ctx is the context to go on with.
func (ci *clientInterceptor) begin(ctx context.Context, service, method string) (context.Context, clientCall) {
	return ci.beginWith(ctx, ci.method(service, method))
}

// beginWith is begin with the method's span start options m already
// found.
func (ci *clientInterceptor) beginWith(ctx context.Context, m *clientMethod) (context.Context, clientCall) {
	t := ci.t
	cc := clientCall{m: m}
	if !t.skipUnsampled || !unsampledParent(ctx) {
		ctx, cc.span = t.tracer.Start(ctx, cc.m.m.name, cc.m.opts...)
		cc.recording = cc.span.IsRecording()
	}
	if cc.recording && len(cc.m.late) > 0 {
		cc.span.SetAttributes(cc.m.late...)
	}
	pc := carriers.Get().(*pairCarrier)
	t.props.Inject(ctx, pc)
	switch {
	case len(pc.kv) == 2: // traceparent alone: the context copies it
		ctx = fleet.AppendOutgoingMetadata(ctx, pc.kv...)
	case len(pc.kv) > 0: // the context keeps the slice
		ctx = fleet.AppendOutgoingMetadata(ctx, slices.Clone(pc.kv)...)
	}
	pc.reset()
	carriers.Put(pc)
	cc.measure = t.clientDur.Enabled(ctx)
	if cc.measure {
		cc.start = time.Since(epoch)
	}
	return ctx, cc
}

// end records the outcome err and ends the span.
func (ci *clientInterceptor) end(ctx context.Context, cc *clientCall, err error) {
	ea := cc.m.m.endFor(fleet.CodeOf(err))
	if cc.measure {
		ci.t.clientDur.Record(ctx, (time.Since(epoch) - cc.start).Seconds(), ea.record...)
	}
	if cc.recording {
		cc.span.SetAttributes(ea.end...)
		if err != nil {
			cc.span.SetStatus(codes.Error, err.Error())
		}
	}
	if cc.span != nil {
		cc.span.End()
	}
}

// WrapUnary runs each call under a client span.
func (ci *clientInterceptor) WrapUnary(invoke client.Invoker) client.Invoker {
	// The chain serves every method of a connection: the first method
	// called skips the table's map reads, the others look theirs up.
	var first atomic.Pointer[clientMethod]
	return func(ctx context.Context, service, method string, args, reply any) error {
		m := first.Load()
		if m == nil || m.m.method != method || m.m.service != service {
			m = ci.method(service, method)
			first.CompareAndSwap(nil, m)
		}
		ctx, cc := ci.beginWith(ctx, m)
		err := invoke(ctx, service, method, args, reply)
		ci.end(ctx, &cc, err)
		return err
	}
}

// WrapStream runs each stream under a client span, from its open to its
// end (the first failed Receive, io.EOF meaning ok, or else its Close,
// code canceled), with an rpc.message event for each message.
func (ci *clientInterceptor) WrapStream(next client.StreamFunc) client.StreamFunc {
	return func(ctx context.Context, spec *client.StreamSpec) (client.Stream, error) {
		ctx, cc := ci.begin(ctx, spec.Service, spec.Method)
		st, err := next(ctx, spec)
		if err != nil {
			ci.end(ctx, &cc, err)
			return nil, err
		}
		ts := &tracedClientStream{Stream: st, ci: ci, ctx: ctx, cc: cc}
		if cc.recording {
			ts.span = cc.span
		}
		return ts, nil
	}
}

// tracedClientStream adds a client stream's message events and ends its
// span once.
type tracedClientStream struct {
	client.Stream
	msgEvents
	ci   *clientInterceptor
	ctx  context.Context
	cc   clientCall
	once sync.Once
}

func (s *tracedClientStream) Send(msg any) error {
	err := s.Stream.Send(msg)
	if err == nil {
		s.event(&s.sent, sentAttr)
	}
	return err
}

func (s *tracedClientStream) Receive(msg any) error {
	err := s.Stream.Receive(msg)
	switch {
	case err == nil:
		s.event(&s.received, receivedAttr)
	case err == io.EOF:
		s.finish(nil)
	default:
		s.finish(err)
	}
	return err
}

func (s *tracedClientStream) Close() error {
	s.finish(fleet.NewError(fleet.Canceled, "stream closed before its end"))
	return s.Stream.Close()
}

// finish ends the stream's span once, with err's code.
func (s *tracedClientStream) finish(err error) {
	s.once.Do(func() { s.ci.end(s.ctx, &s.cc, err) })
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

// infoCarrier adapts a call's request metadata to
// propagation.TextMapCarrier for extraction: Get reads one key without
// making the metadata map (fleet.CallInfo.MetadataValue); Set does
// nothing. The W3C header names are lower case, as Fleet metadata keys
// are case-sensitive.
type infoCarrier struct{ ci *fleet.CallInfo }

func (c infoCarrier) Get(key string) string {
	v, _ := c.ci.MetadataValue(key)
	return v
}

func (c infoCarrier) Set(string, string) {}

func (c infoCarrier) Keys() []string {
	md := c.ci.Metadata()
	keys := make([]string, 0, len(md))
	for k := range md {
		keys = append(keys, k)
	}
	return keys
}

// pairCarrier collects what a propagator injects as key, value pairs for
// fleet.AppendOutgoingMetadata (no map). The carriers are reused through
// carriers, as one passed to a propagator (an interface) would otherwise
// be allocated on every call: the W3C propagators write traceparent
// always, tracestate and baggage only when not empty, so most calls
// inject one pair, which AppendOutgoingMetadata copies into the context;
// more pairs are copied into a slice of their own first.
type pairCarrier struct {
	kv  []string
	buf [4]string
}

var carriers = sync.Pool{New: func() any { return new(pairCarrier) }}

// reset empties c for reuse, keeping no strings alive.
func (c *pairCarrier) reset() {
	clear(c.buf[:])
	c.kv = c.buf[:0]
}

func (c *pairCarrier) Get(key string) string {
	for i := len(c.kv) - 2; i >= 0; i -= 2 {
		if c.kv[i] == key {
			return c.kv[i+1]
		}
	}
	return ""
}

func (c *pairCarrier) Set(key, value string) {
	if c.kv == nil {
		c.kv = c.buf[:0]
	}
	c.kv = append(c.kv, key, value)
}

func (c *pairCarrier) Keys() []string {
	keys := make([]string, 0, len(c.kv)/2)
	for i := 0; i < len(c.kv); i += 2 {
		keys = append(keys, c.kv[i])
	}
	return keys
}

// unsampledParent reports whether ctx carries a valid span context that
// is not sampled: the parent WithParentBasedSampling lets the
// interceptors skip the tracer for.
func unsampledParent(ctx context.Context) bool {
	sc := trace.SpanContextFromContext(ctx)
	return sc.IsValid() && !sc.IsSampled()
}
