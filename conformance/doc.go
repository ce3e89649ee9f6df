// Package conformance runs the Connect conformance suite
// (connectrpc.com/conformance, runner connectconformance) against a Fleet
// server behind its gateway: the suite's ConformanceService is a Fleet
// service (Register), ServeCompat starts a server as the runner asks, and
// the package's test drives the runner over gRPC, gRPC-Web and Connect,
// HTTP/1.1 and HTTP/2, with and without TLS. Its own module keeps the
// suite's dependencies out of the gateway's.
package conformance
