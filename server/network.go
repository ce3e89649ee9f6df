package server

import (
	"context"
	"errors"
	"net"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/transport"
)

// listenTransport listens over a network registered with package
// transport.
func listenTransport(network, addr string) (net.Listener, error) {
	t, err := transport.Get(network)
	if err != nil {
		return nil, err
	}
	lis, err := t.Listen(context.Background(), addr)
	if err != nil {
		var fe *fleet.Error
		if errors.As(err, &fe) {
			return nil, err
		}
		return nil, fleet.Errorf(fleet.Unavailable, "listen %s %s: %w", network, addr, err)
	}
	return lis, nil
}
