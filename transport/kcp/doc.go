// Package kcp runs Fleet over KCP, a reliable ARQ protocol over UDP
// (github.com/xtaci/kcp-go/v5, v5.7.5), for lossy and long-distance links
// where TCP's slow loss recovery hurts RPC latency: KCP retransmits
// after a fast RTO and on duplicate acknowledgements, without slow start,
// trading bandwidth for latency.
//
// Importing the package registers the network "kcp" with package
// github.com/fleetrpc/fleet/transport, with the zero Config:
//
//	import _ "github.com/fleetrpc/fleet/transport/kcp"
//
//	srv.ListenAndServe("kcp", ":8972")
//	c, err := client.Dial(ctx, "kcp", "10.0.0.1:8972")
//	// or a registry entry with Addr "kcp@10.0.0.1:8972"
//
// Register(cfg) replaces it with other settings; New(cfg) gives a
// Transport to use directly. Both ends must agree on the block cipher and
// the FEC shards.
//
// A Fleet connection is one KCP session. Before handing a session to the
// server, the listener waits for the client's 8-byte hello ("FLEETKC"
// and a version byte, see docs/protocol.md) and answers it, so a dial
// fails with Unavailable when no Fleet server answers (KCP itself has no
// handshake) and datagrams from strangers never reach the server.
//
// KCP has no close handshake. Close keeps a session that wrote recently
// alive for a few retransmission timeouts (at most Config.Linger) so its
// last bytes are sent, then sends the peer a 12-byte reset datagram
// ("FLEETRS", a version byte and the session's conversation id, three
// copies), on which the peer closes its side at once: a killed server
// fails its clients' calls with Unavailable promptly, as over TCP. Should
// every copy be lost, Fleet's heartbeat (client) or idle timeout (server)
// still notices. Like a TCP reset, a reset can be forged by whoever sees
// the conversation id; use Key to keep it private.
package kcp
