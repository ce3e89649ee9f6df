package server

import "github.com/fleetrpc/fleet/protocol"

// streamOptions are the server's stream limits; zero fields take their
// defaults.
type streamOptions struct {
	window, maxStreams, maxMessage int
	connWindow                     int // WithConnWindow; < 0: none
}

// Defaults of the stream options.
const (
	DefaultStreamWindow      = 256 << 10
	DefaultMaxStreamsPerConn = 100
	DefaultMaxStreamMessage  = 4 << 20
	// DefaultConnWindow is the connection-wide window: see WithConnWindow.
	DefaultConnWindow = 4 << 20
)

func (o streamOptions) withDefaults() streamOptions {
	if o.window <= 0 {
		o.window = DefaultStreamWindow
	}
	o.window = min(o.window, protocol.MaxWindow)
	if o.maxStreams <= 0 {
		o.maxStreams = DefaultMaxStreamsPerConn
	}
	if o.maxMessage <= 0 {
		o.maxMessage = DefaultMaxStreamMessage
	}
	switch {
	case o.connWindow == 0:
		o.connWindow = DefaultConnWindow
	case o.connWindow < 0:
		o.connWindow = 0 // announce none
	}
	o.connWindow = min(o.connWindow, protocol.MaxWindow)
	return o
}

// WithStreamWindow sets the flow-control window the server grants each
// stream, in bytes of message payload: how much a client may send on a
// stream before the handler consumes it. Default 256 KiB; at most 2^31-1.
func WithStreamWindow(n int) Option {
	return optionFunc(func(o *options) { o.stream.window = n })
}

// WithConnWindow sets the connection-wide flow-control window the server
// grants each client connection, in bytes of stream message payload over
// all its streams: how much a client may send before the server's read
// loop has accepted it (the server grants it back on receipt, not when
// handlers consume it; each stream's window bounds what it buffers). It
// is announced in the server's Hello (setting 4) and used, in both
// directions, only with clients that announce one too. A client that
// overruns it gets a go-away with reason protocol error and its
// connection is closed. Default 4 MiB; at most 2^31-1; a negative n
// announces none (no connection window, as with servers before it).
func WithConnWindow(n int) Option {
	return optionFunc(func(o *options) { o.stream.connWindow = n })
}

// WithMaxStreamsPerConn caps the streams open at once on one connection;
// an open over the cap ends at once with ResourceExhausted. Default 100.
func WithMaxStreamsPerConn(n int) Option {
	return optionFunc(func(o *options) { o.stream.maxStreams = n })
}

// WithMaxStreamMessage caps the size of one message a client sends on a
// stream, in bytes; a larger one ends the stream with ResourceExhausted.
// Default 4 MiB (frames are also bounded by WithLimits).
func WithMaxStreamMessage(n int) Option {
	return optionFunc(func(o *options) { o.stream.maxMessage = n })
}
