package server

import "github.com/fleetrpc/fleet/protocol"

type streamOptions struct{ window, maxStreams, maxMessage int }

func (o streamOptions) withDefaults() streamOptions {
	if o.window <= 0 {
		o.window = 256 << 10
	}
	if o.maxStreams <= 0 {
		o.maxStreams = 100
	}
	if o.maxMessage <= 0 {
		o.maxMessage = 4 << 20
	}
	return o
}

type serverStream struct{}

func (st *serverStream) reset(err error) {}

func (c *conn) onStreamFrame(f protocol.Frame, buf *[]byte) { protocol.Release(buf) }
