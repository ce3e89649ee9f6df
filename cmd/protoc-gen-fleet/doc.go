// Command protoc-gen-fleet is a protoc (and buf) plugin that writes Fleet
// stubs for the services of .proto files: for each file with a service, a
// file NAME_fleet.pb.go beside protoc-gen-go's NAME.pb.go, in the same Go
// package, holding for every service S:
//
//	const SName = "pkg.S"               // the service's name on the wire
//	type SServer interface { ... }      // one method per RPC
//	type UnimplementedSServer struct{}  // embed it: every method Unimplemented
//	func RegisterS(srv *server.Server, impl SServer) error
//	type SClient interface { ... }      // one method per RPC
//	func NewSClient(c *client.Client) SClient
//	func NewSXClient(x *client.XClient) SClient
//
// S is the service's Go name (its .proto name in Go case): a service
// named GreeterService, as buf's lint rules want it, gives
// GreeterServiceName, GreeterServiceServer, RegisterGreeterService,
// GreeterServiceClient, NewGreeterServiceClient and
// NewGreeterServiceXClient. These names and the shapes below are the
// generator's stable API: they change only with a new major version of
// this module, and every generated file names the generator's version.
//
// The method shapes, by RPC kind:
//
//	unary          server: M(ctx, *Req) (*Res, error)
//	               client: M(ctx, *Req) (*Res, error)
//	server stream  server: M(ctx, *Req, *server.ServerStream[Res]) error
//	               client: M(ctx, *Req) (*client.ServerStreamForClient[Res], error)
//	client stream  server: M(ctx, *server.ClientStream[Req]) (*Res, error)
//	               client: M(ctx) (*client.ClientStreamForClient[Req, Res], error)
//	bidi stream    server: M(ctx, *server.BidiStream[Req, Res]) error
//	               client: M(ctx) (*client.BidiStreamForClient[Req, Res], error)
//
// RegisterS registers each method with server.HandleUnary,
// server.HandleServerStream, server.HandleClientStream or
// server.HandleBidiStream under the service's full .proto name (package
// and service, "pkg.S") and the method's .proto name, so the gateway
// serves it to gRPC clients as /pkg.S/M and its reflection shows the
// .proto file that protoc-gen-go's code registers. The leading comments
// of services and methods in the .proto become the doc comments of the
// generated interfaces and methods.
//
// Usage:
//
//	protoc --go_out=. --go_opt=paths=source_relative \
//	       --fleet_out=. --fleet_opt=paths=source_relative greeter.proto
//
// or a buf.gen.yaml naming the local plugins protoc-gen-go and
// protoc-gen-fleet (docs/proto-first.md). The plugin takes protoc-gen-go's
// options (paths, module, M...). protoc-gen-fleet --version prints its
// version.
package main
