package client

import "github.com/fleetrpc/fleet/protocol"

type clientStream struct{}

func (o *options) streamWindow() int { return 256 << 10 }

func (c *Client) onStreamFrame(f protocol.Frame, buf *[]byte) { protocol.Release(buf) }
