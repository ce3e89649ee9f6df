// Package health serves a Fleet server's serving status over the native
// protocol as the service "fleet.Health", method "Check", in the shape of
// gRPC's grpc.health.v1.Health/Check.
//
// A server does not serve it until told, as in grpc-go:
//
//	srv := server.New()
//	if err := health.Register(srv); err != nil { ... }
//
// The status itself is the server's (server.Server.ServingStatus and
// SetServingStatus), so the gateway's grpc.health.v1 and an HTTP
// readiness check report the same: SERVING per registered service, the
// status set with SetServingStatus, and NOT_SERVING from the moment
// Shutdown or Close begins. Calls to fleet.Health pass through the
// server's auth function and interceptors like any other call.
//
// It imports no Fleet package but fleet and server.
package health
