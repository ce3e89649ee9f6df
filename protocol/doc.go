// Package protocol is Fleet's wire format: length-prefixed binary frames,
// each a fixed 24-byte header followed by the service name, method name,
// metadata and payload. The byte layout is specified in docs/protocol.md.
//
// Frames are built by appending to a []byte (AppendFrame, or BeginFrame and
// EndFrame around a payload appended in place) and parsed straight from a
// []byte (Parse) without copying: the parsed Frame's slices point into the
// input. Reader reads frames from a stream into pooled buffers, checking
// the length prefix against Limits before allocating anything.
//
// Every error this package returns is a *fleet.Error: ResourceExhausted for
// a frame or section over its limit (wrapping ErrTooLarge) and
// InvalidArgument for one that does not parse (wrapping ErrMalformed). A
// connection that yields either must be closed: framing is lost.
//
// Revision 2 (control.go) grows the protocol without a new wire
// version: a capability exchange (Hello, in the first ping and its pong),
// the rule that frames of unknown types are skipped, go-away payloads with
// a reason and the last sequence id, cancel, stream and window update
// frames. Their payload parsers (ParseHello, ParseGoAway,
// ParseWindowUpdate) fail with the same codes and never panic.
//
// # Messages
//
// Requests, responses and stream messages carry a value encoded with a
// codec and, above a size, compressed. AppendMessage builds such a frame
// (begin, encode, compress, end with the size limit); DecompressRoom
// bounds what its payload may decompress to (measuring when the bytes do
// not say) and DecodeMessage decompresses within that room and decodes.
// AppendStatus builds a response or stream end carrying an error. Client
// and server use these for calls and streams alike; message.go has their
// one error mapping.
//
// # Owns and imports
//
// The package owns the bytes of a frame: the header layout and its
// accessors (SetCompressed writes the compression fields of an encoded
// header), control frames (AppendControl for ping, pong and go-away) and
// messages (encoding, compression and their limits). Client and server
// never index a frame's bytes themselves.
//
// It imports only the root package (for errors and metadata), codec,
// compress and internal/bufpool. It must not import server, client,
// selector or registry; the root package's TestPackageImports checks this.
package protocol
