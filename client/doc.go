// Package client calls Fleet services.
//
// A Client is one multiplexed connection to one server: any number of
// goroutines call through it at once (Call, Go, Send), requests from many
// callers are coalesced into few writes, and responses are matched to
// calls by sequence id in whatever order they come. A call's context
// deadline travels to the server; cancelling a call frees everything it
// held at once. Heartbeats detect a silent server; a broken connection
// fails every pending call promptly with Unavailable.
//
// An XClient calls one service over the many servers a registry.Discovery
// lists, choosing one per call with a selector.Selector and surviving
// failures by its FailMode: Failfast, Failover (another server), Failtry
// (the same server), Failbackup (a backup request after a delay). Retries
// are bounded by attempts, the caller's deadline and a RetryBudget; a
// circuit breaker per server (BreakerSettings) skips failing
// servers and probes them back. Broadcast and Fork call every server.
// WithPolicy lets a PolicySource (package policy, a traffic policy held in
// a registry) override these settings call by call: the servers a call may
// use, its timeout, retries, hedging and injected faults.
//
// InProcess joins a client to a server in the same process without a
// socket, through the server's whole pipeline: the way to test a service
// (docs/testing.md). The "inprocess" network of package transport does the
// same by name, for Dial and XClient.
//
// Errors are *fleet.Error values; errors.Is with ErrNotSent tells a call
// that never reached the wire (safe to retry anywhere) from one whose
// connection broke after sending (ErrConnectionLost).
//
// Streams (CallServerStream, CallClientStream, CallBidiStream, and the
// XCall... forms on an XClient) share the connection with calls, each
// with its own flow-control window. A revision 2 server learns of a
// cancelled call or stream through a cancel frame; the client learns the
// server's revision from the Hello exchange at connection start
// (Capabilities).
//
// # Owns and imports
//
// This package owns calling: connections to servers, request encoding,
// response matching, client interceptors, and for XClient the endpoint
// table, retries, retry budget, circuit breakers and fan-out. It imports
// the root package, protocol, codec, compress, registry (the interfaces)
// and selector. It must not import server or any registry backend
// (registry/static included): backends are handed in as a
// registry.Discovery. The root package's TestPackageImports checks this.
package client
