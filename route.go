package fleet

// Route names the way a call reached a server: the native protocol, one
// of the gateway's protocols, or a call made in the server's own process.
// Interceptors read it from CallInfo.Route to label what they record; the
// set of values is small and fixed by the server and its front ends, so it
// is safe as a metric label.
type Route string

// The routes Fleet's server and gateway set.
const (
	RouteNative    Route = "native"    // the native Fleet protocol (unary calls and streams)
	RouteGRPC      Route = "grpc"      // the gateway's gRPC side
	RouteHTTP      Route = "http"      // the gateway's HTTP/JSON side
	RouteJSONRPC   Route = "jsonrpc"   // the gateway's JSON-RPC 2.0 side
	RouteConnect   Route = "connect"   // the gateway's Connect side
	RouteGRPCWeb   Route = "grpcweb"   // the gateway's gRPC-Web side
	RouteInProcess Route = "inprocess" // Server.Invoke or InvokeStream called without a route, in process
)
