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
package protocol
