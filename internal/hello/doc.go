// Package hello is the opening exchange of Fleet's datagram transports
// (transport/kcp, transport/quic) and the listener that runs it.
//
// KCP has no handshake of its own: a dial succeeds whether or not a
// server listens, and any datagram that reaches a KCP listener creates a
// session. QUIC streams appear to the peer only once data is sent on them.
// So the dialling side writes an 8-byte hello naming the transport and
// version, and the listening side answers with the same 8 bytes before
// the connection is handed to the Fleet server; a dial then fails promptly
// (Unavailable) when no Fleet server answers, and a session that does not
// say hello within the handshake timeout is closed without ever reaching
// the server. The format is in docs/protocol.md ("Transports").
package hello
