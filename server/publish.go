package server

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/fleetrpc/fleet/registry"
)

// PublishConfig tunes Publish. The zero value works.
type PublishConfig struct {
	// LoadInterval is how often the server's load is written into its
	// registry record: in-flight calls, calls per second and the 99th
	// percentile of the time the server took to handle the interval's
	// calls (see registry.Load; measured from the handler's start to the
	// reply's write, in a fixed-bucket histogram that costs two clock
	// reads and an atomic add per call, once a Publish reports load). Default 5 s; negative disables load
	// reports.
	LoadInterval time.Duration
	// DrainDelay is how long Shutdown keeps serving normally after
	// deregistering, so that clients see the record vanish and stop
	// choosing this server before it refuses calls. Default 1 s.
	DrainDelay time.Duration
}

// Publish registers inst with reg (the registrar keeps the record alive),
// writes the server's load into the record every LoadInterval, and makes
// Shutdown deregister it first, then wait DrainDelay while still serving,
// before it stops accepting. inst.Addr must be the address clients dial.
// It returns the registrar's error when the first registration fails.
func (s *Server) Publish(ctx context.Context, reg registry.Registrar, inst registry.Instance, cfg PublishConfig) error {
	if cfg.LoadInterval == 0 {
		cfg.LoadInterval = 5 * time.Second
	}
	if cfg.DrainDelay == 0 {
		cfg.DrainDelay = time.Second
	}
	if err := reg.Register(ctx, inst); err != nil {
		return err
	}
	pub := s.pubs.add(reg, inst)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		if cfg.LoadInterval < 0 {
			select {
			case <-stop:
			case <-s.stopped: // closed without Shutdown
			}
			return
		}
		t := time.NewTicker(cfg.LoadInterval)
		defer t.Stop()
		_, lastCalls := s.Load()
		last := time.Now()
		s.lat.on.Store(true)
		var lastLat [latBuckets]uint64
		s.lat.quantileSince(&lastLat, 0.99) // start from now
		for {
			select {
			case <-stop:
				return
			case <-s.stopped:
				return
			case now := <-t.C:
				inflight, calls := s.Load()
				load := registry.Load{InFlight: inflight, CallsPerSecond: float64(calls-lastCalls) / now.Sub(last).Seconds(),
					P99Ms: float64(s.lat.quantileSince(&lastLat, 0.99)) / float64(time.Millisecond)}
				lastCalls, last = calls, now
				uctx, cancel := context.WithTimeout(context.Background(), cfg.LoadInterval)
				// The record as it stands, with any operator change (fleet.Admin).
				if err := pub.Update(uctx, func(in *registry.Instance) { in.Load = load }); err != nil {
					s.opts.logger.Warn("fleet server: publishing load", "service", inst.Service, "err", err)
				}
				cancel()
			}
		}
	}()
	s.OnShutdown(func(ctx context.Context) {
		close(stop)
		<-done
		s.pubs.remove(pub)
		if err := reg.Deregister(ctx, inst); err != nil {
			s.opts.logger.Warn("fleet server: deregistering", "service", inst.Service, "err", err)
		}
		t := time.NewTimer(cfg.DrainDelay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	})
	return nil
}

// publications are the records Publish keeps registered.
type publications struct {
	mu   sync.Mutex
	list []*Publication
}

// Publication is one record that Publish keeps in a registry. Its
// methods are safe for concurrent use: changes (Update) and the server's
// load reports are written one at a time, each on top of the other, so
// neither undoes the other.
type Publication struct {
	mu   sync.Mutex
	reg  registry.Registrar
	inst registry.Instance
}

func (p *publications) add(reg registry.Registrar, inst registry.Instance) *Publication {
	pub := &Publication{reg: reg, inst: inst}
	p.mu.Lock()
	p.list = append(p.list, pub)
	p.mu.Unlock()
	return pub
}

func (p *publications) remove(pub *Publication) {
	p.mu.Lock()
	p.list = slices.DeleteFunc(p.list, func(x *Publication) bool { return x == pub })
	p.mu.Unlock()
}

// Publications returns the records Publish keeps registered now, in the
// order they were published; a record leaves the list when Shutdown
// deregisters it. Operator tools (package server/admin) read and change
// them. The slice is the caller's. Safe for concurrent use.
func (s *Server) Publications() []*Publication {
	s.pubs.mu.Lock()
	defer s.pubs.mu.Unlock()
	return slices.Clone(s.pubs.list)
}

// Instance returns the record as last written to its registry (a copy).
func (pub *Publication) Instance() registry.Instance {
	pub.mu.Lock()
	defer pub.mu.Unlock()
	in := pub.inst
	in.Tags = slices.Clone(in.Tags)
	in.Meta = maps.Clone(in.Meta)
	return in
}

// Update applies change to a copy of the record and writes it to the
// registry (registry.Registrar.Update with ctx); the change is kept, and
// later load reports carry it, only when the write succeeds. It returns
// the registrar's error. change must not keep the *registry.Instance.
func (pub *Publication) Update(ctx context.Context, change func(*registry.Instance)) error {
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
