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
// # Owns and imports
//
// The package owns the bytes of a frame: the header layout and its
// accessors (SetCompressed writes the compression fields of an encoded
// header), control frames (AppendControl for ping, pong and go-away) and
// payload compression (CompressPayload and DecompressPayload, shared by
// client and server). Client and server never index a frame's bytes
// themselves.
//
// It imports only the root package (for errors and metadata), compress
// and internal/bufpool. It must not import codec, server, client, selector
// or registry; the root package's TestPackageImports checks this.
package protocol
