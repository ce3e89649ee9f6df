package peers

import (
	"context"
	"errors"
	"net"

	"github.com/fleetrpc/fleet/gateway"
)

// Two peers serve the Fleet peer's server through gateway.Serve, which
// sniffs each connection's first bytes (module gateway):
//
//   - fleet-gw: Fleet's own client through the gateway's listener; beside
//     "fleet" in the same run it measures what the sniffing costs the
//     native path. A variant: measured only when named in --peers.
//   - fleet-grpc: the gRPC-go peer's client against Fleet's gRPC side
//     (h2c, grpc-go's own transport); beside "grpc" it compares with
//     grpc-go's own server. The gateway serves unary calls
//     only, so there is no log-oneway (a client stream).

// The names of the gateway peers.
const (
	FleetGateway = "fleet-gw"
	FleetGRPC    = "fleet-grpc"
)

func init() {
	Register(&Peer{
		Name:       FleetGateway,
		Title:      "Fleet via gateway",
		Desc:       "the Fleet peer's server behind gateway.Serve (protocol sniffing), Fleet's client",
		Ops:        []Op{OpEcho, OpAdd, OpLog, OpLogOneway},
		OnewayDesc: "client.Send (oneway frame)",
		NewServer:  newGatewayServer,
		Dial:       dialFleet,
		Variant:    true,
	})
	Register(&Peer{
		Name:      FleetGRPC,
		Title:     "gRPC-go to Fleet",
		Desc:      "the gRPC-go peer's client against the Fleet peer's server through the gateway's gRPC side",
		Ops:       []Op{OpEcho, OpAdd, OpLog},
		NewServer: newGatewayServer,
		Dial: func(ctx context.Context, addr string, o ClientOptions) (Client, error) {
			c, err := dialGRPC(ctx, addr, o)
			if err != nil {
				return nil, err
			}
			return unaryOnly{c}, nil
		},
	})
}

type gatewayServer struct {
	*fleetServer
	gw *gateway.Gateway
}

func newGatewayServer(o ServerOptions) (Server, error) {
	s, err := newFleetServer(o, registerPointer)
	if err != nil {
		return nil, err
	}
	fs := s.(*fleetServer)
	return &gatewayServer{fleetServer: fs, gw: gateway.New(fs.srv)}, nil
}

func (s *gatewayServer) Serve(lis net.Listener) error {
	err := s.gw.Serve(lis)
	if errors.Is(err, gateway.ErrClosed) {
		return nil
	}
	return err
}

func (s *gatewayServer) Close() error { return s.gw.Close() }

// unaryOnly is a client whose LogOneway (a gRPC client stream) the
// gateway does not serve.
type unaryOnly struct{ Client }

func (unaryOnly) LogOneway(context.Context) error { return ErrUnsupported }
