// Package quic runs Fleet over QUIC (github.com/quic-go/quic-go,
// v0.65.0), with TLS 1.3 as QUIC requires: for lossy and long-distance
// links, QUIC recovers from loss faster than TCP (no retransmission
// ambiguity, more ACK ranges, a probe timeout instead of TCP's RTO
// back-off) and its handshake takes one round trip including TLS.
//
// Importing the package registers the network "quic" with package
// github.com/fleetrpc/fleet/transport, with the zero Config, which dials
// with the system's root certificates but cannot listen (a server needs a
// certificate). Register(cfg) replaces it:
//
//	quic.Register(quic.Config{TLS: serverOrClientTLS})
//	srv.ListenAndServe("quic", ":8972")
//	c, err := client.Dial(ctx, "quic", "host:8972")
//	// or a registry entry with Addr "quic@host:8972"
//
// A Fleet connection is one QUIC connection carrying one bidirectional
// stream, opened by the client; Fleet's own frames multiplex the calls on
// it, as over TCP. This is the simplest robust mapping (the stream is a
// net.Conn, and Fleet's coalescing writer, flow control and go-away work
// unchanged); its cost is head-of-line blocking: a lost packet delays
// every call whose bytes follow it on the stream until it is
// retransmitted, as over TCP, though QUIC's loss recovery is quicker. A
// stream per call would confine a loss to its call, at the price of a
// stream open per call and a mapping of Fleet's frames onto streams; see
// docs/protocol.md ("Transports").
//
// The client writes an 8-byte hello ("FLEETQU" and a version byte) on
// the stream and the server answers it before handing the connection to
// the Fleet server, so the server learns of the stream at once and a
// dial fails when the peer is not a Fleet server.
//
// Close sends the stream's FIN and waits, up to Config.Linger, for the
// peer to close the connection (a Fleet peer does so as soon as it reads
// the end of the stream), so data written before Close is delivered
// before the connection is torn down.
package quic
