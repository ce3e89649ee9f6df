// Package transport lets Fleet run over networks other than the ones the
// standard library's net package provides: a Transport is a listener and a
// dialer, registered under a network name such as "kcp" or "quic".
//
// server.Server.Listen, server.Server.ListenAndServe and client.Dial look
// a network up here when it is not one of the built-in networks (tcp,
// tcp4, tcp6, unix, unixpacket, tls), and a registry.Instance whose
// Network (or whose Addr prefix, as in "kcp@127.0.0.1:8972") names a
// registered transport is dialled over it by client.XClient.
//
// The UDP transports live in their own modules so that the core does not
// require their libraries: github.com/fleetrpc/fleet/transport/kcp
// (KCP over UDP, github.com/xtaci/kcp-go/v5) and
// github.com/fleetrpc/fleet/transport/quic (QUIC, github.com/quic-go/quic-go).
// Importing one registers its network in its init function. Users add
// their own the same way, with Register.
//
// This package registers one network itself: "inprocess" (InProcess),
// connections within one process over in-memory pipes, for tests and for
// services that call each other inside one binary.
//
// A Transport must deliver a reliable, ordered byte stream per connection
// (the Fleet frame format has no framing of its own beyond lengths), must
// honour net.Conn deadlines (the client's writer and the server's idle
// timeout use them), and its Close should deliver data already written
// before tearing the connection down, as TCP does, so the last responses
// of a graceful shutdown reach the client.
package transport
