package admin

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/server"
)

// Service is the name under which Register serves the admin service.
// Methods:
//
//	Published(*Request, *Published)     the records Publish keeps in registries
//	Steer(*SteerRequest, *Published)    change their weight or state
const Service = "fleet.Admin"

// Request is the argument of fleet.Admin.Published; it has no fields.
type Request struct{}

// SteerRequest is the argument of fleet.Admin.Steer: for every record
// published for Service ("" for all of them), Weight replaces the weight
// when it is positive and State the state when it is not empty
// (registry.Active or registry.Draining).
type SteerRequest struct {
	Service string         `json:"service,omitempty"`
	Weight  int            `json:"weight,omitempty"`
	State   registry.State `json:"state,omitempty"`
}

// Published lists the records the server publishes, as last written: the
// reply of both methods.
type Published struct {
	Instances []registry.Instance `json:"instances"`
}

// Config tunes Register. The zero value works.
type Config struct {
	// Logger receives one Info record per record changed by Steer (the
	// service, address, change, caller's address and the registry's
	// error). Default: slog.Default().
	Logger *slog.Logger
}

// admin is the receiver of the fleet.Admin service.
type admin struct {
	srv *server.Server
	log *slog.Logger
}

// Register serves fleet.Admin (see Service) on srv. It changes where
// traffic goes: give srv an auth function (server.WithAuth) unless only
// trusted callers reach it. It fails, registering nothing, when srv
// already serves a method of fleet.Admin. Call it before serving, like any registration.
func Register(srv *server.Server, cfg Config) error {
	a := &admin{srv: srv, log: cfg.Logger}
	if a.log == nil {
		a.log = slog.Default()
	}
	if _, taken := srv.Method(Service, "Steer"); taken {
		return fmt.Errorf("admin: %s.Steer is already registered", Service)
	}
	if err := server.Handle(srv, Service, "Published", a.published); err != nil {
		return err
	}
	return server.Handle(srv, Service, "Steer", a.steer)
}

// published answers fleet.Admin.Published.
func (a *admin) published(_ context.Context, _ *Request, reply *Published) error {
	reply.Instances = []registry.Instance{}
	for _, pub := range a.srv.Publications() {
		reply.Instances = append(reply.Instances, pub.Instance())
	}
	return nil
}

// steer answers fleet.Admin.Steer. A negative weight or an unknown state
// fails with InvalidArgument, a service with no record with NotFound, a
// registry write with Unavailable (records written before it stay
// changed).
func (a *admin) steer(ctx context.Context, req *SteerRequest, reply *Published) error {
	switch {
	case req.Weight < 0:
		return fleet.Errorf(fleet.InvalidArgument, "steer: negative weight %d", req.Weight)
	case req.State != "" && req.State != registry.Active && req.State != registry.Draining:
		return fleet.Errorf(fleet.InvalidArgument, "steer: state %q: want %q or %q", req.State, registry.Active, registry.Draining)
	}
	var matched int
	for _, pub := range a.srv.Publications() {
		in := pub.Instance()
		if req.Service != "" && in.Service != req.Service {
			continue
		}
		matched++
		err := pub.Update(ctx, func(in *registry.Instance) {
			if req.Weight > 0 {
				in.Weight = req.Weight
			}
			if req.State != "" {
				in.State = req.State
			}
		})
		a.log.Info("fleet admin: operator change to a registry record", "service", in.Service, "addr", in.Key(),
			"weight", req.Weight, "state", string(req.State), "by", fmt.Sprint(fleet.PeerAddr(ctx)), "err", err)
		if err != nil {
			return fleet.Errorf(fleet.Unavailable, "steer %s %s: %v", in.Service, in.Key(), err)
		}
	}
	if matched == 0 {
		return fleet.Errorf(fleet.NotFound, "steer: nothing published for service %q", req.Service)
	}
	return a.published(ctx, nil, reply)
}
