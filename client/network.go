package client

import (
	"context"
	"errors"
	"net"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/transport"
)

// dialNetwork connects over network: the net package's dialer for the
// built-in networks, else the Transport registered under network.
func dialNetwork(ctx context.Context, network, addr string) (net.Conn, error) {
	if transport.Builtin(network) {
		var d net.Dialer
		nc, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, fleet.Errorf(fleet.Unavailable, "dial %s %s: %w", network, addr, err)
		}
		return nc, nil
	}
	t, err := transport.Get(network)
	if err != nil {
		return nil, err
	}
	nc, err := t.Dial(ctx, addr)
	if err != nil {
		var fe *fleet.Error
		if errors.As(err, &fe) {
			return nil, err
		}
		return nil, fleet.Errorf(fleet.Unavailable, "dial %s %s: %w", network, addr, err)
	}
	return nc, nil
}

// instanceNetwork returns the network and address to dial for a registry
// instance: its Network when set, else the network an "kcp@host:port"
// style Addr names, else "tcp".
func instanceNetwork(in registry.Instance) (network, addr string) {
	if in.Network != "" {
		return in.Network, in.Addr
	}
	if n, a := transport.SplitAddr(in.Addr); n != "" {
		return n, a
	}
	return "tcp", in.Addr
}
