package health

import (
	"context"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/server"
)

// Service is the name under which Register serves the health check; its
// one method is "Check" (*CheckRequest → *CheckResponse).
const Service = "fleet.Health"

// CheckRequest is the argument of fleet.Health.Check: it asks for the
// status of Service, or of the whole server when Service is "".
type CheckRequest struct {
	Service string
}

// CheckResponse is the reply of fleet.Health.Check. Status is SERVING or
// NOT_SERVING (1 or 2 on the wire, as in grpc.health.v1).
type CheckResponse struct {
	Status server.ServingStatus
}

// Register serves fleet.Health on srv: Check answers srv.ServingStatus of
// the requested service, or fails with fleet.NotFound for a service that
// is neither registered nor given a status with SetServingStatus. Register
// fails when srv already serves fleet.Health.Check. Call it before
// serving, like any registration.
func Register(srv *server.Server) error {
	return server.Handle(srv, Service, "Check", func(_ context.Context, req *CheckRequest, resp *CheckResponse) error {
		st, ok := srv.ServingStatus(req.Service)
		if !ok {
			return fleet.Errorf(fleet.NotFound, "unknown service %q", req.Service)
		}
		resp.Status = st
		return nil
	})
}
