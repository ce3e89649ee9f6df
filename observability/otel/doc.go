// Package fleetotel traces Fleet calls and measures them with
// OpenTelemetry (go.opentelemetry.io/otel).
//
// Import it as
//
//	import fleetotel "github.com/fleetrpc/fleet/observability/otel"
//
// and install it with one option per side:
//
//	tel := fleetotel.New(fleetotel.WithTracerProvider(tp), fleetotel.WithMeterProvider(mp))
//	srv := server.New(tel.ServerOption())
//	c, err := client.Dial(ctx, "tcp", addr, tel.ClientOption())
//	x, err := client.NewXClient("Arith", disc, tel.XClientOption())
//
// Spans. Every call gets one client span (kind Client) on the caller and one
// server span (kind Server) on the server, named "Service/Method", with the
// attributes of the OpenTelemetry semantic conventions for RPC:
// rpc.system = "fleet", rpc.service, rpc.method, rpc.response.status_code
// (the fleet.Code name, such as "ok" or "not_found"), error.type (the code
// name, on failures only), server.address and server.port (server spans:
// the address the connection was accepted on), client.address and
// client.port (server spans: the caller). Client spans carry
// server.address and server.port only when installed with ClientOptionFor
// (a client interceptor is not told which connection it runs on). A client
// span's status is Error for
// every code but OK; a server span's only for the codes that mean a server
// fault (unknown, deadline_exceeded, unimplemented, internal, unavailable,
// data_loss, shutting_down), as the conventions ask for gRPC.
//
// Cost. Span names, start options and metric attribute sets are built once
// per method. Samplers see the span's name and kind; the rpc.* and address
// attributes, the outcome attributes and the status are added only to
// recording spans (WithSamplerAttributes gives the rpc.* attributes at
// start instead). The trace context is written into the request metadata
// for unsampled spans too, so the callee's ParentBased sampler follows the
// caller's decision; the headers go through the propagators (the injection
// carrier is reused, and a lone traceparent is copied into the outgoing
// context, one allocation). WithParentBasedSampling (opt-in, for the SDK's
// ParentBased sampler) skips the tracer for calls whose parent is not
// sampled. No clock
// is read for the duration histograms while they are disabled (no meter
// provider).
//
// Context propagation. The client interceptor writes the W3C trace context
// (traceparent, tracestate) and W3C baggage (baggage) of the call's context
// into the request metadata, and the server interceptor reads them back, so
// the server span is a child of the client span and a handler that calls
// further services with its own context continues the same trace; baggage
// reaches the handler's context. WithPropagators replaces the two
// propagators.
//
// XClient. XClientOption installs the client interceptor on every
// connection an XClient opens, so each attempt (the first try, each
// failover or retry, a backup request) is its own client span, a child of
// the span in the caller's context, with the server span of that attempt
// below it. An attempt that never reached a connection (no server could be
// dialled, circuit breaker open) has no span. A program that wants one span
// for the logical call starts it around XClient.Call; the attempts then
// hang below it.
//
// Metrics. rpc.server.call.duration and rpc.client.call.duration are
// float64 histograms in seconds with the attributes rpc.system,
// rpc.service, rpc.method and rpc.response.status_code.
//
// Providers. The tracer provider, meter provider and propagators are the
// ones passed as options; without an option the global provider of that
// kind (otel.GetTracerProvider, otel.GetMeterProvider, a no-op unless the
// program set one) is used, and the propagators are W3C trace context plus
// W3C baggage. Nothing global is set by this package. A Telemetry is safe
// for concurrent use and may be shared by many servers and clients.
package fleetotel
