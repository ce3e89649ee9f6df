package server

import (
	"context"
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
				if err := pub.write(uctx, func(in *registry.Instance) { in.Load = load }); err != nil {
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
