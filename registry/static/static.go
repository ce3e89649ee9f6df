package static

import (
	"context"
	"fmt"
	"sync"

	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/registry/internal/regutil"
)

// Config is the fixed content of a Table. The zero value is an empty
// Table.
type Config struct {
	// Instances are the fixed instances, of any services. Invalid ones
	// make NewTable and NewDiscovery fail.
	Instances []registry.Instance
}

// Table is an in-memory registry: its Registrars write to it and its
// Discoveries read from it. It is safe for concurrent use.
type Table struct {
	mu       sync.Mutex
	services map[string]map[string]record // service → Key → record
	watchers map[string]map[*regutil.Feed]struct{}
}

type record struct {
	in    registry.Instance
	owner *Registrar // nil for the fixed instances of Config
}

var (
	_ registry.Registrar = (*Registrar)(nil)
	_ registry.Discovery = (*Discovery)(nil)
)

// NewTable returns a Table holding cfg.Instances. It fails when one of
// them is invalid.
func NewTable(cfg Config) (*Table, error) {
	t := &Table{
		services: make(map[string]map[string]record),
		watchers: make(map[string]map[*regutil.Feed]struct{}),
	}
	for _, in := range cfg.Instances {
		if err := in.Validate(); err != nil {
			return nil, fmt.Errorf("static: %w", err)
		}
		t.put(regutil.CloneInstance(in), nil)
	}
	return t, nil
}

// NewDiscovery returns a Discovery over a new Table holding
// cfg.Instances.
func NewDiscovery(cfg Config) (*Discovery, error) {
	t, err := NewTable(cfg)
	if err != nil {
		return nil, err
	}
	return t.Discovery(), nil
}

// Peer returns a Discovery with one instance: service at the TCP address
// addr. It panics when service or addr is invalid, like regexp.MustCompile.
func Peer(service, addr string) *Discovery {
	d, err := NewDiscovery(Config{Instances: []registry.Instance{{Service: service, Addr: addr}}})
	if err != nil {
		panic(err)
	}
	return d
}

// Registrar returns a new Registrar writing to t.
func (t *Table) Registrar() *Registrar {
	return &Registrar{t: t, keys: make(map[[2]string]struct{})}
}

// Discovery returns a new Discovery reading from t.
func (t *Table) Discovery() *Discovery {
	return &Discovery{t: t, life: regutil.NewLife()}
}

// put stores in; the caller holds t.mu or owns t exclusively.
func (t *Table) put(in registry.Instance, owner *Registrar) {
	m := t.services[in.Service]
	if m == nil {
		m = make(map[string]record)
		t.services[in.Service] = m
	}
	m[in.Key()] = record{in: in, owner: owner}
}

// list returns the sorted instances of service; the caller holds t.mu.
func (t *Table) list(service string) []registry.Instance {
	m := t.services[service]
	list := make([]registry.Instance, 0, len(m))
	for _, rec := range m {
		list = append(list, regutil.CloneInstance(rec.in))
	}
	registry.Sort(list)
	return list
}

// changed publishes the list of service to its watchers; the caller holds
// t.mu.
func (t *Table) changed(service string) {
	for f := range t.watchers[service] {
		f.Publish(t.list(service), false)
	}
}

// Registrar registers instances in a Table. It is safe for concurrent use.
type Registrar struct {
	t      *Table
	closed bool                   // guarded by t.mu
	keys   map[[2]string]struct{} // service, Key registered by r; guarded by t.mu
}

// Register stores in in the Table, replacing a record with the same
// service and Key. It fails for an invalid instance and with
// registry.ErrClosed after Close.
func (r *Registrar) Register(ctx context.Context, in registry.Instance) error {
	if err := in.Validate(); err != nil {
		return fmt.Errorf("static: %w", err)
	}
	r.t.mu.Lock()
	defer r.t.mu.Unlock()
	if r.closed {
		return fmt.Errorf("static: register %s: %w", in.Key(), registry.ErrClosed)
	}
	r.t.put(regutil.CloneInstance(in), r)
	r.keys[[2]string{in.Service, in.Key()}] = struct{}{}
	r.t.changed(in.Service)
	return nil
}

// Update replaces the record of an instance r registered; it fails with
// registry.ErrNotRegistered for any other.
func (r *Registrar) Update(ctx context.Context, in registry.Instance) error {
	if err := in.Validate(); err != nil {
		return fmt.Errorf("static: %w", err)
	}
	r.t.mu.Lock()
	defer r.t.mu.Unlock()
	if r.closed {
		return fmt.Errorf("static: update %s: %w", in.Key(), registry.ErrClosed)
	}
	if _, ok := r.keys[[2]string{in.Service, in.Key()}]; !ok {
		return fmt.Errorf("static: update %s of %q: %w", in.Key(), in.Service, registry.ErrNotRegistered)
	}
	r.t.put(regutil.CloneInstance(in), r)
	r.t.changed(in.Service)
	return nil
}

// Deregister removes the record of in's service and Key from the Table,
// whoever stored it; removing an absent record is not an error.
func (r *Registrar) Deregister(ctx context.Context, in registry.Instance) error {
	if err := in.Validate(); err != nil {
		return fmt.Errorf("static: %w", err)
	}
	r.t.mu.Lock()
	defer r.t.mu.Unlock()
	if r.closed {
		return fmt.Errorf("static: deregister %s: %w", in.Key(), registry.ErrClosed)
	}
	delete(r.keys, [2]string{in.Service, in.Key()})
	m := r.t.services[in.Service]
	if _, ok := m[in.Key()]; ok {
		delete(m, in.Key())
		if len(m) == 0 {
			delete(r.t.services, in.Service)
		}
		r.t.changed(in.Service)
	}
	return nil
}

// Close removes every record r registered and still owns, as if their
// TTL ran out at once. Calling Close again does nothing.
func (r *Registrar) Close() error {
	r.t.mu.Lock()
	defer r.t.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	for k := range r.keys {
		service, key := k[0], k[1]
		m := r.t.services[service]
		if rec, ok := m[key]; ok && rec.owner == r {
			delete(m, key)
			if len(m) == 0 {
				delete(r.t.services, service)
			}
			r.t.changed(service)
		}
	}
	r.keys = nil
	return nil
}

// Discovery reads a Table. It is safe for concurrent use.
type Discovery struct {
	t    *Table
	life *regutil.Life
}

// Instances returns the instances of service sorted by Key; an unknown
// service has none. It fails for an empty service name or one holding a
// '/', and with registry.ErrClosed after Close.
func (d *Discovery) Instances(ctx context.Context, service string) ([]registry.Instance, error) {
	if err := regutil.ValidateService(service); err != nil {
		return nil, err
	}
	if d.life.Closed() {
		return nil, fmt.Errorf("static: instances of %q: %w", service, registry.ErrClosed)
	}
	d.t.mu.Lock()
	defer d.t.mu.Unlock()
	return d.t.list(service), nil
}

// Watch delivers the current instances of service and then the full list
// after every change made through a Registrar of the Table, until ctx is
// done or d is closed. Over a fixed list that is one delivery.
func (d *Discovery) Watch(ctx context.Context, service string) (<-chan []registry.Instance, error) {
	return d.life.Watch(ctx, service, func(ctx context.Context, feed *regutil.Feed) {
		d.t.mu.Lock()
		m := d.t.watchers[service]
		if m == nil {
			m = make(map[*regutil.Feed]struct{})
			d.t.watchers[service] = m
		}
		m[feed] = struct{}{}
		feed.Publish(d.t.list(service), true)
		d.t.mu.Unlock()

		<-ctx.Done()

		d.t.mu.Lock()
		delete(m, feed)
		if len(m) == 0 {
			delete(d.t.watchers, service)
		}
		d.t.mu.Unlock()
	})
}

// Close ends every watch of d. Calling Close again does nothing.
func (d *Discovery) Close() error {
	d.life.Close()
	return nil
}

// Services returns the names of the services with at least one instance
// in the Table, sorted. It fails with registry.ErrClosed after Close.
func (d *Discovery) Services(ctx context.Context) ([]string, error) {
	if d.life.Closed() {
		return nil, fmt.Errorf("static: services: %w", registry.ErrClosed)
	}
	d.t.mu.Lock()
	defer d.t.mu.Unlock()
	set := make(map[string]struct{}, len(d.t.services))
	for name, m := range d.t.services {
		if len(m) > 0 {
			set[name] = struct{}{}
		}
	}
	return regutil.Names(set), nil
}

var _ registry.ServiceLister = (*Discovery)(nil)
