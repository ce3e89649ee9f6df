// Package reflection serves the service "fleet.Reflection", through which
// a Fleet server describes itself to callers: its services and their
// methods, the codecs it accepts, and for each method the types of its
// argument and reply, as protobuf descriptors for generated messages and
// as JSON Schemas (draft 2020-12) for other Go types. The `fleet list`,
// `describe` and `call` commands read it.
//
// A server does not serve it until told, as in grpc-go:
//
//	srv := server.New()
//	if err := reflection.Register(srv); err != nil { ... }
//
// RegisterWith(srv, Config{GoTypes: gateway.GoTypeDescriptor}) also
// describes each Go type by the protobuf message the gateway maps it to
// over gRPC, from which `fleet describe --proto` writes a .proto.
//
// It reads the server through its public API (server.Server.Services and
// Method) when each call is answered. Calls to it pass through the
// server's auth function and interceptors like any other call. The wire
// format is specified in docs/protocol.md.
//
// It imports no Fleet package but fleet, server and codec.
package reflection
