package registrytest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fleetrpc/fleet/registry"
)

// Options tunes Run to a backend.
type Options struct {
	// Timeout bounds every wait for a Watch delivery or for Instances to
	// show a change. Default 10s.
	Timeout time.Duration
	// ExpiryTimeout bounds the wait, after a Registrar is closed without
	// Deregister, for its record to disappear (the backend's TTL, lease or
	// session timeout plus its detection delay). Default Timeout.
	ExpiryTimeout time.Duration
	// Settle is how long Run watches, after a Deregister, that the record
	// does not come back (a keep-alive racing the removal). Default 1.5s.
	Settle time.Duration
	// TCPOnly tells Run the backend stores only "host:port" addresses
	// (mDNS), so no unix-socket instance is registered.
	TCPOnly bool
	// NoServiceLister tells Run the backend's Discovery does not
	// implement registry.ServiceLister (mDNS). Without it, Run fails when
	// the Discovery lacks it.
	NoServiceLister bool
}

func (o *Options) defaults() {
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.ExpiryTimeout <= 0 {
		o.ExpiryTimeout = o.Timeout
	}
	if o.Settle <= 0 {
		o.Settle = 1500 * time.Millisecond
	}
}

// Run runs the conformance suite as parallel subtests of t. newRegistrar
// and newDiscovery are called once or more per subtest, with the
// subtest's t, and must return a Registrar and a Discovery of the same
// registry; Run closes every one it gets. Each subtest uses services from
// ServiceName, so Run may share a registry with other tests.
func Run(t *testing.T, newRegistrar func(t *testing.T) registry.Registrar, newDiscovery func(t *testing.T) registry.Discovery, opts Options) {
	opts.defaults()
	s := &suite{newR: newRegistrar, newD: newDiscovery, o: opts}
	tests := []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"RegisterInstances", s.registerInstances},
		{"ReRegisterReplaces", s.reRegisterReplaces},
		{"Watch", s.watch},
		{"WatchEmpty", s.watchEmpty},
		{"Update", s.update},
		{"Deregister", s.deregister},
		{"ExpiryAfterClose", s.expiryAfterClose},
		{"WatchEnds", s.watchEnds},
		{"InvalidInput", s.invalidInput},
		{"Concurrent", s.concurrent},
	}
	if !opts.NoServiceLister {
		tests = append(tests, struct {
			name string
			fn   func(t *testing.T)
		}{"Services", s.services})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t)
		})
	}
}

type suite struct {
	newR func(t *testing.T) registry.Registrar
	newD func(t *testing.T) registry.Discovery
	o    Options
}

func (s *suite) registrar(t *testing.T) registry.Registrar {
	t.Helper()
	r := s.newR(t)
	t.Cleanup(func() { r.Close() })
	return r
}

func (s *suite) discovery(t *testing.T) registry.Discovery {
	t.Helper()
	d := s.newD(t)
	t.Cleanup(func() { d.Close() })
	return d
}

func (s *suite) ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 3*s.o.Timeout+s.o.ExpiryTimeout)
	t.Cleanup(cancel)
	return ctx
}

func (s *suite) register(t *testing.T, r registry.Registrar, ins ...registry.Instance) {
	t.Helper()
	for _, in := range ins {
		if err := r.Register(s.ctx(t), in); err != nil {
			t.Fatalf("Register(%s): %v", in.Key(), err)
		}
	}
}

func (s *suite) watchOf(t *testing.T, d registry.Discovery, service string) <-chan []registry.Instance {
	t.Helper()
	ch, err := d.Watch(s.ctx(t), service)
	if err != nil {
		t.Fatalf("Watch(%q): %v", service, err)
	}
	return ch
}

func wantList(t *testing.T, got, want []registry.Instance) {
	t.Helper()
	want = append([]registry.Instance(nil), want...)
	registry.Sort(want)
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("instances differ\n got: %+v\nwant: %+v", got, want)
	}
}

// registerInstances: every field survives the registry, Instances returns
// the list sorted, services are isolated (one service's name a prefix of
// another's), an unknown service has no instances.
func (s *suite) registerInstances(t *testing.T) {
	r, d := s.registrar(t), s.discovery(t)
	svc := ServiceName(t)
	other := svc + "-x"
	ins := []registry.Instance{
		{
			Service: svc, Addr: Addr(3), Weight: 3, Group: "blue", Version: "v1.2.3",
			Tags: []string{"a", "b c"}, Latitude: 52.52, Longitude: 13.405,
			State: registry.Active, Load: registry.Load{InFlight: 5, CallsPerSecond: 12.5},
			Meta: map[string]string{"zone": "eu-1", "k": "v=w"},
		},
		{Service: svc, Addr: Addr(1), Network: "tls"},
		{Service: svc, Addr: Addr(2), State: registry.Draining},
	}
	if !s.o.TCPOnly {
		ins = append(ins, registry.Instance{Service: svc, Addr: "/tmp/fleet-registrytest.sock", Network: "unix"})
	}
	s.register(t, r, ins...)
	s.register(t, r, registry.Instance{Service: other, Addr: Addr(9)})

	got := WaitInstances(t, d, svc, s.o.Timeout, func(l []registry.Instance) bool { return len(l) == len(ins) })
	wantList(t, got, ins)
	got = WaitInstances(t, d, other, s.o.Timeout, func(l []registry.Instance) bool { return len(l) == 1 })
	wantList(t, got, []registry.Instance{{Service: other, Addr: Addr(9)}})

	none, err := d.Instances(s.ctx(t), svc+"-unknown")
	if err != nil || len(none) != 0 {
		t.Fatalf("Instances(unknown service) = %v, %v; want empty, nil", none, err)
	}
}

// reRegisterReplaces: registering the same service and Key again replaces
// the record instead of adding one.
func (s *suite) reRegisterReplaces(t *testing.T) {
	r, d := s.registrar(t), s.discovery(t)
	svc := ServiceName(t)
	s.register(t, r, registry.Instance{Service: svc, Addr: Addr(1), Weight: 1})
	s.register(t, r, registry.Instance{Service: svc, Addr: Addr(1), Weight: 7})
	got := WaitInstances(t, d, svc, s.o.Timeout, func(l []registry.Instance) bool { return len(l) == 1 && l[0].Weight == 7 })
	wantList(t, got, []registry.Instance{{Service: svc, Addr: Addr(1), Weight: 7}})
	Quiet(t, svc, s.watchOf(t, d, svc), s.o.Settle, func(l []registry.Instance) bool { return len(l) != 1 || l[0].Weight != 7 })
}

// watch: the first list is the current one, then additions and removals
// arrive as full lists.
func (s *suite) watch(t *testing.T) {
	r, d := s.registrar(t), s.discovery(t)
	svc := ServiceName(t)
	a := registry.Instance{Service: svc, Addr: Addr(1), Weight: 2}
	b := registry.Instance{Service: svc, Addr: Addr(2), Tags: []string{"new"}}
	s.register(t, r, a)
	WaitInstances(t, d, svc, s.o.Timeout, HasKeys(a.Key()))

	ch := s.watchOf(t, d, svc)
	wantList(t, Next(t, svc, ch, s.o.Timeout), []registry.Instance{a})

	s.register(t, r, b)
	wantList(t, WaitFor(t, svc, ch, s.o.Timeout, HasKeys(a.Key(), b.Key())), []registry.Instance{a, b})

	if err := r.Deregister(s.ctx(t), a); err != nil {
		t.Fatalf("Deregister: %v", err)
	}
	wantList(t, WaitFor(t, svc, ch, s.o.Timeout, HasKeys(b.Key())), []registry.Instance{b})

	if err := r.Deregister(s.ctx(t), b); err != nil {
		t.Fatalf("Deregister: %v", err)
	}
	WaitFor(t, svc, ch, s.o.Timeout, HasKeys())
}

// watchEmpty: a watch of a service with no instances starts with an empty
// list and then sees the first registration.
func (s *suite) watchEmpty(t *testing.T) {
	r, d := s.registrar(t), s.discovery(t)
	svc := ServiceName(t)
	ch := s.watchOf(t, d, svc)
	if first := Next(t, svc, ch, s.o.Timeout); len(first) != 0 {
		t.Fatalf("first list of an empty service = %v; want empty", Keys(first))
	}
	a := registry.Instance{Service: svc, Addr: Addr(1)}
	s.register(t, r, a)
	wantList(t, WaitFor(t, svc, ch, s.o.Timeout, HasKeys(a.Key())), []registry.Instance{a})
}

// update: Update's new Load and State reach watchers and Instances;
// Update of an instance never registered fails with ErrNotRegistered.
func (s *suite) update(t *testing.T) {
	r, d := s.registrar(t), s.discovery(t)
	svc := ServiceName(t)
	a := registry.Instance{Service: svc, Addr: Addr(1), Load: registry.Load{InFlight: 1, CallsPerSecond: 1}}
	s.register(t, r, a)
	WaitInstances(t, d, svc, s.o.Timeout, HasKeys(a.Key()))
	ch := s.watchOf(t, d, svc)
	WaitFor(t, svc, ch, s.o.Timeout, HasKeys(a.Key()))

	a2 := a
	a2.Load = registry.Load{InFlight: 7, CallsPerSecond: 3.5}
	a2.State = registry.Draining
	a2.Meta = map[string]string{"reason": "deploy"}
	if err := r.Update(s.ctx(t), a2); err != nil {
		t.Fatalf("Update: %v", err)
	}
	got := WaitFor(t, svc, ch, s.o.Timeout, func(l []registry.Instance) bool {
		return len(l) == 1 && l[0].Load == a2.Load && l[0].State == registry.Draining
	})
	wantList(t, got, []registry.Instance{a2})
	got = WaitInstances(t, d, svc, s.o.Timeout, func(l []registry.Instance) bool { return len(l) == 1 && l[0].Load == a2.Load })
	wantList(t, got, []registry.Instance{a2})
	// The keep-alive must refresh the updated record, not the old one.
	Quiet(t, svc, ch, s.o.Settle, func(l []registry.Instance) bool { return len(l) != 1 || l[0].Load != a2.Load })

	err := r.Update(s.ctx(t), registry.Instance{Service: svc, Addr: Addr(2)})
	if !errors.Is(err, registry.ErrNotRegistered) {
		t.Fatalf("Update(unregistered) = %v; want ErrNotRegistered", err)
	}
}

// deregister: the record goes away, stays away (no keep-alive brings it
// back), and a second Deregister is not an error.
func (s *suite) deregister(t *testing.T) {
	r, d := s.registrar(t), s.discovery(t)
	svc := ServiceName(t)
	a := registry.Instance{Service: svc, Addr: Addr(1)}
	b := registry.Instance{Service: svc, Addr: Addr(2)}
	s.register(t, r, a, b)
	WaitInstances(t, d, svc, s.o.Timeout, HasKeys(a.Key(), b.Key()))
	ch := s.watchOf(t, d, svc)

	if err := r.Deregister(s.ctx(t), a); err != nil {
		t.Fatalf("Deregister: %v", err)
	}
	WaitInstances(t, d, svc, s.o.Timeout, HasKeys(b.Key()))
	WaitFor(t, svc, ch, s.o.Timeout, HasKeys(b.Key()))
	Quiet(t, svc, ch, s.o.Settle, func(l []registry.Instance) bool { return len(l) != 1 })
	if err := r.Deregister(s.ctx(t), a); err != nil {
		t.Fatalf("second Deregister: %v", err)
	}
}

// expiryAfterClose: a Registrar closed without Deregister (a killed
// server) stops keeping its records alive; they expire and watchers see
// them go. The closed Registrar refuses further work with ErrClosed.
func (s *suite) expiryAfterClose(t *testing.T) {
	r, d := s.newR(t), s.discovery(t)
	defer r.Close()
	keep := s.registrar(t)
	svc := ServiceName(t)
	a := registry.Instance{Service: svc, Addr: Addr(1)}
	b := registry.Instance{Service: svc, Addr: Addr(2)}
	s.register(t, r, a)
	s.register(t, keep, b)
	ch := s.watchOf(t, d, svc)
	WaitFor(t, svc, ch, s.o.Timeout, HasKeys(a.Key(), b.Key()))

	start := time.Now()
	if err := r.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	WaitFor(t, svc, ch, s.o.ExpiryTimeout, HasKeys(b.Key()))
	t.Logf("record expired %v after Close", time.Since(start).Round(10*time.Millisecond))
	WaitInstances(t, d, svc, s.o.Timeout, HasKeys(b.Key()))

	if err := r.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := r.Register(s.ctx(t), a); !errors.Is(err, registry.ErrClosed) {
		t.Errorf("Register after Close = %v; want ErrClosed", err)
	}
	if err := r.Update(s.ctx(t), a); !errors.Is(err, registry.ErrClosed) {
		t.Errorf("Update after Close = %v; want ErrClosed", err)
	}
	if err := r.Deregister(s.ctx(t), a); !errors.Is(err, registry.ErrClosed) {
		t.Errorf("Deregister after Close = %v; want ErrClosed", err)
	}
}

// watchEnds: a watch's channel closes when its context ends and when the
// Discovery is closed; a closed Discovery refuses work with ErrClosed.
func (s *suite) watchEnds(t *testing.T) {
	d := s.newD(t)
	defer d.Close()
	svc := ServiceName(t)

	ctx, cancel := context.WithCancel(s.ctx(t))
	ch1, err := d.Watch(ctx, svc)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	Next(t, svc, ch1, s.o.Timeout)
	cancel()
	waitClosed(t, ch1, s.o.Timeout)

	ch2 := s.watchOf(t, d, svc)
	ch3 := s.watchOf(t, d, svc+"-other")
	if err := d.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	waitClosed(t, ch2, s.o.Timeout)
	waitClosed(t, ch3, s.o.Timeout)
	if err := d.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := d.Watch(s.ctx(t), svc); !errors.Is(err, registry.ErrClosed) {
		t.Errorf("Watch after Close = %v; want ErrClosed", err)
	}
	if _, err := d.Instances(s.ctx(t), svc); !errors.Is(err, registry.ErrClosed) {
		t.Errorf("Instances after Close = %v; want ErrClosed", err)
	}
}

func waitClosed(t *testing.T, ch <-chan []registry.Instance, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatalf("watch channel not closed within %v", timeout)
		}
	}
}

// invalidInput: instances without a service or address, or with a '/' in
// the service, and empty service names are refused.
func (s *suite) invalidInput(t *testing.T) {
	r, d := s.registrar(t), s.discovery(t)
	ctx := s.ctx(t)
	for _, in := range []registry.Instance{
		{},
		{Service: "svc"},
		{Addr: Addr(1)},
		{Service: "a/b", Addr: Addr(1)},
	} {
		if err := r.Register(ctx, in); err == nil {
			t.Errorf("Register(%+v) succeeded; want an error", in)
		}
	}
	for _, svc := range []string{"", "a/b"} {
		if _, err := d.Instances(ctx, svc); err == nil {
			t.Errorf("Instances(%q) succeeded; want an error", svc)
		}
		if _, err := d.Watch(ctx, svc); err == nil {
			t.Errorf("Watch(%q) succeeded; want an error", svc)
		}
	}
}

// concurrent: one Registrar used from many goroutines at once.
func (s *suite) concurrent(t *testing.T) {
	r, d := s.registrar(t), s.discovery(t)
	svc := ServiceName(t)
	const n = 8
	ch := s.watchOf(t, d, svc)
	var wg sync.WaitGroup
	errs := make(chan error, 4*n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := registry.Instance{Service: svc, Addr: Addr(i + 1)}
			if err := r.Register(s.ctx(t), in); err != nil {
				errs <- fmt.Errorf("Register %d: %w", i, err)
				return
			}
			for j := 1; j <= 3; j++ {
				in.Load.InFlight = int64(10*i + j)
				if err := r.Update(s.ctx(t), in); err != nil {
					errs <- fmt.Errorf("Update %d: %w", i, err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	final := func(l []registry.Instance) bool {
		if len(l) != n {
			return false
		}
		for _, in := range l {
			var i int
			fmt.Sscanf(in.Addr, "127.0.0.1:%d", &i)
			if in.Load.InFlight != int64(10*(i-20001)+3) {
				return false
			}
		}
		return true
	}
	WaitFor(t, svc, ch, s.o.Timeout, final)
	WaitInstances(t, d, svc, s.o.Timeout, final)

	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.Deregister(s.ctx(t), registry.Instance{Service: svc, Addr: Addr(i + 1)}); err != nil {
				t.Errorf("Deregister %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	WaitFor(t, svc, ch, s.o.Timeout, HasKeys())
}

// services: a ServiceLister lists a service once it has an instance (two
// instances give one name), in sorted order, and stops listing it once
// its last instance is deregistered; it fails with ErrClosed after Close.
func (s *suite) services(t *testing.T) {
	r, d := s.registrar(t), s.discovery(t)
	lister, ok := d.(registry.ServiceLister)
	if !ok {
		t.Fatalf("%T does not implement registry.ServiceLister (set Options.NoServiceLister if the backend cannot)", d)
	}
	svc := ServiceName(t)
	other := svc + "-x"
	a := registry.Instance{Service: svc, Addr: Addr(1)}
	b := registry.Instance{Service: svc, Addr: Addr(2), State: registry.Draining}
	c := registry.Instance{Service: other, Addr: Addr(3)}
	s.register(t, r, a, b, c)

	waitServices := func(what string, ok func(set map[string]int) bool) {
		t.Helper()
		deadline := time.Now().Add(s.o.Timeout)
		for {
			names, err := lister.Services(s.ctx(t))
			set := map[string]int{}
			if err == nil {
				if !slices.IsSorted(names) {
					t.Fatalf("Services() = %q: not sorted", names)
				}
				for _, n := range names {
					set[n]++
				}
				if ok(set) {
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("Services() = %q, %v after %v; want %s", names, err, s.o.Timeout, what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitServices(fmt.Sprintf("%q and %q once each", svc, other), func(set map[string]int) bool {
		return set[svc] == 1 && set[other] == 1
	})
	for _, in := range []registry.Instance{a, b} {
		if err := r.Deregister(s.ctx(t), in); err != nil {
			t.Fatalf("Deregister(%s): %v", in.Key(), err)
		}
	}
	waitServices(fmt.Sprintf("%q without %q", other, svc), func(set map[string]int) bool {
		return set[svc] == 0 && set[other] == 1
	})

	d2 := s.newD(t)
	d2.Close()
	if _, err := d2.(registry.ServiceLister).Services(s.ctx(t)); !errors.Is(err, registry.ErrClosed) {
		t.Fatalf("Services after Close: %v; want registry.ErrClosed", err)
	}
}
