// Package gateway serves a Fleet server's services to clients that do not
// speak Fleet's native protocol, on the same port: gRPC (HTTP/2, h2c),
// Connect and gRPC-Web (HTTP/1.1 and HTTP/2, through connect-go's
// handlers; CORS for browser pages with WithCORS), HTTP/JSON
// (POST /{service}/{method}) and JSON-RPC 2.0 (POST / and POST /jsonrpc).
// Every call runs through server.Server.Invoke (streams through
// InvokeStream), so it meets the same auth function, interceptors, hooks,
// limits and Shutdown as a native call.
//
// Gateway.Serve takes a listener and reads the first bytes of each
// connection: a Fleet frame (a 4-byte length prefix, then the magic
// 0xF1 0xEE) goes to the Fleet server untouched; the HTTP/2 client preface
// (cleartext) goes to grpc-go's own transport when the connection's first
// request is gRPC, to net/http otherwise; an HTTP/1.1 request line
// goes to an embedded net/http server; a TLS handshake (with WithTLS) is
// completed and routed by ALPN or by its decrypted first bytes. After
// that decision a native connection is served exactly as by
// server.Server.Serve; the only extra work is one wrapper call per read,
// which returns the six sniffed bytes first.
//
// Over gRPC, methods taking and returning protobuf messages pass their
// bytes through; methods taking and returning Go structs or builtins go
// through protobuf messages synthesized from the Go types (one per type,
// fields numbered in declaration order, named by their json tags), which
// server reflection serves too, so grpcurl calls them without a .proto
// file. Their protobuf bytes are decoded straight into the Go argument,
// the allocations counted against WithMaxDecodeCost, and the Go reply
// encoded straight into protobuf bytes.
//
// Gateway.Handler is the same HTTP side as an http.Handler, for users who
// mount it on their own mux; gRPC through it needs HTTP/2 on that server
// (TLS with ALPN h2, or http.Protocols with UnencryptedHTTP2 for h2c).
//
// HTTP/JSON and JSON-RPC accept only application/json requests (a POST
// of any other type that is no RPC protocol's gets 415 with Accept-Post
// and a text/plain body, as connect-go answers it) that a
// browser did not mark cross-site (Connect and gRPC-Web likewise, unless
// WithCORS allows the page's origin), and serve fleet.Admin only for a
// server with an auth function; with one, gRPC reflection and per-service
// health need the token too. Every HTTP/2 connection has a stream limit
// (WithMaxConcurrentStreams, 100), a 64 KiB header list
// (WithMaxHeaderBytes), a reset-stream cap (WithMaxResetRate) and a
// frame-read timeout (WithFrameReadTimeout);
// HTTP/1.1 has header, body, write and idle timeouts.
//
// The mappings (paths, codes to HTTP statuses and JSON-RPC error codes,
// metadata headers, limits) are documented in docs/gateway.md; which
// server enforces which limit, in docs/security.md.
package gateway
