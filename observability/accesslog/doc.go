// Package accesslog writes one log/slog record per Fleet call: an
// interceptor for servers (Server) and one for clients (Client).
//
// It needs nothing beyond the standard library and the core module, but is
// a module of its own like the Prometheus and OpenTelemetry integrations
// (the repository's layout rule for observability/...): the server and
// client packages stay free of logging policy, and the record's shape can
// evolve without a core release.
//
//	srv := server.New(server.WithInterceptor(accesslog.Server(logger)))
//	c, err := client.Dial(ctx, "tcp", addr, client.WithInterceptor(accesslog.Client(logger)))
//
// Each record has the message "fleet call" and the attributes
//
//	side      "server" or "client"
//	service   service name
//	method    method name
//	code      the fleet.Code name of the outcome ("ok", "not_found", ...)
//	duration  time spent in the interceptor's next step (time.Duration)
//	peer      the caller's address (server records only)
//	oneway    true for oneway calls (server records only; absent otherwise)
//	trace_id  the W3C trace id, when the call carries one
//	error     the error message, on failures only
//
// The trace id is read from the "traceparent" metadata (W3C trace
// context, https://www.w3.org/TR/trace-context/): on the server from the
// request metadata, on the client from the outgoing metadata, so install
// the access log inside (after) the tracing interceptor. WithTraceID
// replaces that lookup.
//
// Calls that succeed are logged at slog.LevelInfo and failed ones at
// slog.LevelWarn (WithLevels). WithSampling logs one successful call in n;
// failures are always logged. When the logger is not enabled for the level
// a call would be logged at, the interceptor only calls next: no clock
// read, no allocation.
//
// Request and response sizes are not in the record: the interceptors see
// decoded arguments, not frames; the Prometheus module counts bytes per
// connection.
package accesslog
