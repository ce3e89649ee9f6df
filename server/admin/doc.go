// Package admin serves the service "fleet.Admin", through which an
// operator steers traffic to a Fleet server: it lists the registry
// records the server keeps with server.Server.Publish and changes their
// weight or state (`fleet dashboard` uses it).
//
// A server does not serve it until told:
//
//	srv := server.New(server.WithAuth(check))
//	if err := admin.Register(srv, admin.Config{Logger: log}); err != nil { ... }
//
// Steer writes the changed records to their registries at once
// (server.Publication.Update) and the server keeps them changed in its
// later load reports, so clients follow within their registry's watch
// latency: a draining instance is skipped by every selector. The server
// stays the only writer of its records, which keeps registry leases and
// TTLs intact. Every change is logged. Calls pass through the server's
// auth function and interceptors like any other call; give the server
// one unless only trusted callers reach it. The wire format is specified
// in docs/protocol.md.
//
// It imports no Fleet package but fleet, server and registry.
package admin
