package server

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/registry"
)

// AdminService is the name of the built-in service through which an
// operator steers traffic to a server (`fleet dashboard` uses it). It is
// served only by servers built WithAdmin. Methods:
//
//	Published(*AdminRequest, *AdminPublished)     the records Publish keeps in registries
//	Steer(*AdminSteerRequest, *AdminPublished)    change their weight or state
//
// Steer writes the changed records to their registries at once and the
// server keeps them changed in its later load reports, so clients follow
// within their registry's watch latency: a draining instance is skipped
// by every selector. The server stays the only writer of its records,
// which keeps registry leases and TTLs intact.
const AdminService = "fleet.Admin"

// AdminRequest is the argument of fleet.Admin.Published; it has no fields.
type AdminRequest struct{}

// AdminSteerRequest is the argument of fleet.Admin.Steer: for every
// record published for Service ("" for all of them), Weight replaces the
// weight when it is positive and State the state when it is not empty
// (registry.Active or registry.Draining).
type AdminSteerRequest struct {
	Service string         `json:"service,omitempty"`
	Weight  int            `json:"weight,omitempty"`
	State   registry.State `json:"state,omitempty"`
}

// AdminPublished lists the records the server publishes, as last written.
type AdminPublished struct {
	Instances []registry.Instance `json:"instances"`
}

// adminOn is the marker WithAdmin leaves among the plugins; it implements
// no hook.
type adminOn struct{}

// WithAdmin serves the fleet.Admin service (see AdminService), through
// which an operator changes the weight and state of the records the
// server publishes. It changes where traffic goes: give the server an
// auth function (WithAuth) unless only trusted callers reach it. Every
// change is logged. Default: not served.
func WithAdmin() Option {
	return optionFunc(func(o *options) { o.plugins = append(o.plugins, adminOn{}) })
}

// publications are the records Publish keeps registered.
type publications struct {
	mu   sync.Mutex
	list []*publication
}

// publication is one record Publish keeps, written under mu so that an
// operator change and a load report never overwrite each other.
type publication struct {
	mu   sync.Mutex
	reg  registry.Registrar
	inst registry.Instance
}

func (p *publications) add(reg registry.Registrar, inst registry.Instance) *publication {
	pub := &publication{reg: reg, inst: inst}
	p.mu.Lock()
	p.list = append(p.list, pub)
	p.mu.Unlock()
	return pub
}

func (p *publications) remove(pub *publication) {
	p.mu.Lock()
	p.list = slices.DeleteFunc(p.list, func(x *publication) bool { return x == pub })
	p.mu.Unlock()
}

func (p *publications) snapshot() []*publication {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.list)
}

func (pub *publication) current() registry.Instance {
	pub.mu.Lock()
	defer pub.mu.Unlock()
	in := pub.inst
	in.Tags = slices.Clone(in.Tags)
	return in
}

// write applies change to the record and writes it to the registry; the
// change is kept only when the write succeeds.
func (pub *publication) write(ctx context.Context, change func(*registry.Instance)) error {
	pub.mu.Lock()
	defer pub.mu.Unlock()
	in := pub.inst
	change(&in)
	if err := pub.reg.Update(ctx, in); err != nil {
		return err
	}
	pub.inst = in
	return nil
}

// registerAdmin installs fleet.Admin when WithAdmin was given, bypassing
// the register hooks like the reflection service.
func (s *Server) registerAdmin() {
	if !slices.ContainsFunc(s.opts.plugins, func(p any) bool { _, ok := p.(adminOn); return ok }) {
		return
	}
	s.registerBuiltin(AdminService, map[string]any{"Published": s.adminPublished, "Steer": s.adminSteer})
}

func (s *Server) adminPublished(_ context.Context, _ *AdminRequest, reply *AdminPublished) error {
	reply.Instances = []registry.Instance{}
	for _, pub := range s.pubs.snapshot() {
		reply.Instances = append(reply.Instances, pub.current())
	}
	return nil
}

// adminSteer answers fleet.Admin.Steer. A negative weight or an unknown
// state fails with InvalidArgument, a service with no record with
// NotFound, a registry write with Unavailable (records written before it
// stay changed).
func (s *Server) adminSteer(ctx context.Context, req *AdminSteerRequest, reply *AdminPublished) error {
	switch {
	case req.Weight < 0:
		return fleet.Errorf(fleet.InvalidArgument, "steer: negative weight %d", req.Weight)
	case req.State != "" && req.State != registry.Active && req.State != registry.Draining:
		return fleet.Errorf(fleet.InvalidArgument, "steer: state %q: want %q or %q", req.State, registry.Active, registry.Draining)
	}
	var matched int
	for _, pub := range s.pubs.snapshot() {
		in := pub.current()
		if req.Service != "" && in.Service != req.Service {
			continue
		}
		matched++
		err := pub.write(ctx, func(in *registry.Instance) {
			if req.Weight > 0 {
				in.Weight = req.Weight
			}
			if req.State != "" {
				in.State = req.State
			}
		})
		s.opts.logger.Info("fleet server: operator change to a registry record", "service", in.Service, "addr", in.Key(),
			"weight", req.Weight, "state", string(req.State), "by", fmt.Sprint(fleet.PeerAddr(ctx)), "err", err)
		if err != nil {
			return fleet.Errorf(fleet.Unavailable, "steer %s %s: %v", in.Service, in.Key(), err)
		}
	}
	if matched == 0 {
		return fleet.Errorf(fleet.NotFound, "steer: nothing published for service %q", req.Service)
	}
	return s.adminPublished(ctx, nil, reply)
}
