// Package server serves Fleet services.
//
// A Server publishes methods and serves them on any number of listeners
// (TCP, Unix, TLS, or any net.Listener). Methods come three ways:
//
//   - Register and RegisterName take a receiver written for Go's net/rpc,
//     unchanged (same rules: args by value or pointer, value or pointer
//     receivers, promoted methods), optionally with a context.Context first;
//     exported methods that do not fit are logged with the reason.
//   - RegisterFunction takes one plain function of the same shape.
//   - Handle[A, R] takes a typed func(ctx, *A, *R) error: the fast path,
//     with no reflection per call.
//
// Method tables are built once, at registration; a call looks its method up
// in a map. Register's and RegisterFunction's methods are then called with
// one reflect.Value.Call; nothing in this package uses unsafe or relies on
// the runtime's internal layout of function values.
//
// Every request runs on its own goroutine (a goroutine that finished an
// earlier request and waits for work, of which at most 1024 wait, or a new
// one; or on a bounded worker pool, WithWorkerPool), so a slow handler
// never delays the others on its connection (a serial caller's lone call
// runs on the connection's reading goroutine, which hands reading to a
// new goroutine if the call runs long: see runFunc in runner.go, and
// inline.go), and responses go
// back in the order handlers finish, written by one coalescing writer per
// connection. A handler's context carries the
// caller's deadline (it ends then, or when the connection closes), the
// request metadata and the caller's address (fleet.CallInfoFrom), and lets
// the handler set response metadata (fleet.SetResponseMetadata).
//
// Failures stay local: a frame that breaks a limit or does not parse
// closes its connection only; a panicking handler fails its call with
// Internal; a request over the per-connection cap fails with
// ResourceExhausted. Shutdown drains gracefully (see its doc); Publish
// ties the server's lifetime to a registry record.
//
// A server keeps a serving status per service (ServingStatus): SERVING
// per registered service, or the status set with SetServingStatus, and
// NOT_SERVING once Shutdown begins. The built-in services live in packages
// of their own and are registered explicitly, through this package's
// public API, as grpc-go's are: health.Register (package server/health)
// serves that status as "fleet.Health"; reflection.Register
// (server/reflection) serves "fleet.Reflection", which `fleet list`,
// `describe` and `call` read; admin.Register (server/admin) serves
// "fleet.Admin", through which an operator steers the records Publish
// keeps (Publications).
//
// Interceptors (WithInterceptor: one Interceptor wraps unary calls and
// streams, in the manner of connect-go's, each method's chain built once
// when it is registered), an auth function (WithAuth) and hooks for what is
// not per call (WithPlugin: connection accepted and closed, service
// registered, call refused) extend it. All Server methods are safe for
// concurrent use.
//
// Streams share connections with calls: HandleServerStream,
// HandleClientStream and HandleBidiStream register typed handlers, and
// RegisterStreams does it by reflection. Each stream has its own flow-control window, so a slow client
// holds back only its own stream. A client's cancel frame ends the
// context of the call or stream it names (see docs/streams.md).
//
// # Owns and imports
//
// This package owns serving: listeners and connections, dispatch, the
// service table, hooks, interceptors, limits and shutdown. It imports the
// root package, protocol, codec, compress and registry (the Registrar
// interface, for Publish). It must not import client, selector or any
// registry backend; the root package's TestPackageImports checks this.
package server
