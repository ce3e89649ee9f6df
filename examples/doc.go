// Package examples holds Fleet's runnable examples, one program per
// directory, each a server and a client in one process on loopback that
// prints a fixed result and exits:
//
//	go run ./examples/hello          # Register a net/rpc type; Call, Go, Send
//	go run ./examples/typed          # server.Handle, RegisterFunction, error codes
//	go run ./examples/streams        # server and bidirectional streams
//	go run ./examples/authtls        # TLS and a token: Client and XClient
//	go run ./examples/failover       # a registry, an XClient, servers killed
//	go run ./examples/gateway        # HTTP/JSON, JSON-RPC 2.0 and gRPC callers
//	go run ./examples/observability  # /metrics, OpenTelemetry spans, access log
//
// The examples are a module of their own so that the core module needs
// none of their dependencies (gRPC, Prometheus, OpenTelemetry). The tests
// of this package build and run every program with a time limit and check
// its output, and check that each Go snippet of the repository's
// README.md marked with a program's path appears verbatim in that program.
// They also check the documentation: every whole program in docs/*.md
// builds, every relative link of README.md and docs/ resolves, and
// docs/README.md links every guide.
package examples
