package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/registry/internal/regutil"
)

// Config configures a Registrar or a Discovery. The zero value talks to
// NATS at nats://127.0.0.1:4222 with the defaults below; the server must
// have JetStream enabled.
type Config struct {
	// URL is the NATS server URL, or several separated by commas.
	// Default nats.DefaultURL ("nats://127.0.0.1:4222"). Ignored when
	// Conn is set.
	URL string
	// Options are added to the connection options when dialing URL
	// (after this package's: reconnect forever, every 500ms).
	Options []nats.Option
	// Conn, when set, is used instead of dialing URL; Close leaves it
	// open.
	Conn *nats.Conn
	// Bucket is the key-value bucket. Default "fleet_services".
	Bucket string
	// PolicyBucket is the key-value bucket of the policy documents a
	// PolicyStore keeps, one key per service, without expiry. Default
	// "fleet_policies".
	PolicyBucket string
	// TTL is the bucket's MaxAge when this package creates the bucket.
	// An existing bucket keeps its own MaxAge, and Registrars refresh at
	// a third of that. Default 10s.
	TTL time.Duration
	// PollInterval is how often a Watch reads the service again to see
	// keys aged out without a marker. Default TTL/2.
	PollInterval time.Duration
	// RequestTimeout bounds each JetStream request when the caller's
	// context has no earlier deadline. Default 5s.
	RequestTimeout time.Duration
	// Logger receives the backend's logs. Default slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.URL == "" {
		c.URL = nats.DefaultURL
	}
	if c.Bucket == "" {
		c.Bucket = "fleet_services"
	}
	if c.PolicyBucket == "" {
		c.PolicyBucket = "fleet_policies"
	}
	if c.TTL <= 0 {
		c.TTL = 10 * time.Second
	}
	if c.PollInterval <= 0 {
		c.PollInterval = c.TTL / 2
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 5 * time.Second
	}
	c.Logger = regutil.Logger(c.Logger, "nats")
	return c
}

// key is the bucket key of in.
func key(in registry.Instance) string {
	return EncodeToken(in.Service) + "." + EncodeToken(in.Key())
}

// filter matches every key of service.
func filter(service string) string { return EncodeToken(service) + ".>" }

// store is the connection and bucket shared by Registrar and Discovery.
type store struct {
	cfg  Config
	nc   *nats.Conn
	own  bool
	js   jetstream.JetStream
	log  *slog.Logger
	life *regutil.Life

	mu sync.Mutex
	kv jetstream.KeyValue
}

func newStore(cfg Config) (*store, error) {
	cfg = cfg.withDefaults()
	nc, own := cfg.Conn, false
	if nc == nil {
		opts := append([]nats.Option{
			nats.Name("fleet-registry"),
			nats.MaxReconnects(-1),
			nats.ReconnectWait(500 * time.Millisecond),
			nats.RetryOnFailedConnect(true),
		}, cfg.Options...)
		var err error
		nc, err = nats.Connect(cfg.URL, opts...)
		if err != nil {
			return nil, fmt.Errorf("nats: connect to %s: %w", cfg.URL, err)
		}
		own = true
	}
	js, err := jetstream.New(nc)
	if err != nil {
		if own {
			nc.Close()
		}
		return nil, fmt.Errorf("nats: %w", err)
	}
	return &store{cfg: cfg, nc: nc, own: own, js: js, log: cfg.Logger, life: regutil.NewLife()}, nil
}

func (s *store) requestContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.cfg.RequestTimeout)
}

// bucket opens the bucket, creating it when missing.
func (s *store) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kv != nil {
		return s.kv, nil
	}
	ctx, cancel := s.requestContext(ctx)
	defer cancel()
	kv, err := s.js.KeyValue(ctx, s.cfg.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		cfg := jetstream.KeyValueConfig{
			Bucket:         s.cfg.Bucket,
			Description:    "Fleet service registry",
			History:        1,
			TTL:            s.cfg.TTL,
			LimitMarkerTTL: max(time.Second, s.cfg.TTL),
		}
		kv, err = s.js.CreateKeyValue(ctx, cfg)
		if errors.Is(err, jetstream.ErrLimitMarkerTTLNotSupported) {
			cfg.LimitMarkerTTL = 0 // nats-server < 2.11: expiries leave no marker
			kv, err = s.js.CreateKeyValue(ctx, cfg)
		}
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = s.js.KeyValue(ctx, s.cfg.Bucket)
		}
		if err == nil {
			s.log.Info("created bucket", "bucket", s.cfg.Bucket, "ttl", s.cfg.TTL, "limit_markers", cfg.LimitMarkerTTL > 0)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("bucket %q: %w", s.cfg.Bucket, err)
	}
	s.kv = kv
	return kv, nil
}

// close stops the goroutines and closes the connection if owned.
func (s *store) close() {
	if !s.life.Close() {
		return
	}
	if s.own {
		s.nc.Close()
	}
}

var (
	_ registry.Registrar = (*Registrar)(nil)
	_ registry.Discovery = (*Discovery)(nil)
)

// Registrar records instances in the bucket and puts them again before
// they age out. It is safe for concurrent use; Register, Update and
// Deregister are serialized.
type Registrar struct {
	s    *store
	regs *regutil.Registrations[*entry]
}

// entry is one registered instance.
type entry struct {
	key   string
	kv    jetstream.KeyValue
	every time.Duration // refresh interval

	mu    sync.Mutex // guards value; serializes puts of key
	value []byte
}

// NewRegistrar returns a Registrar using cfg. It connects in the
// background: NATS need not be reachable yet.
func NewRegistrar(cfg Config) (*Registrar, error) {
	s, err := newStore(cfg)
	if err != nil {
		return nil, err
	}
	r := &Registrar{s: s}
	r.regs = &regutil.Registrations[*entry]{
		Backend: "nats",
		Life:    s.life,
		Key:     key,
		Create:  r.create,
		Write:   r.write,
		Keep:    r.keep,
		Delete:  r.delete,
	}
	return r, nil
}

// Register puts in's record and puts it again every MaxAge/3 (the
// bucket's). Registering the same service and Key again replaces the
// record. It fails for an invalid instance, when NATS does not answer
// within ctx and RequestTimeout, and with registry.ErrClosed after Close.
func (r *Registrar) Register(ctx context.Context, in registry.Instance) error {
	return r.regs.Register(ctx, in)
}

// Update puts in's new record. It fails with registry.ErrNotRegistered
// for an instance r has not registered.
func (r *Registrar) Update(ctx context.Context, in registry.Instance) error {
	return r.regs.Update(ctx, in)
}

// Deregister stops refreshing in's key and deletes it. Deregistering an
// instance r did not register deletes its key too; an absent key is not
// an error. When NATS cannot be reached the refresh is stopped all the
// same, so the record ages out within MaxAge.
func (r *Registrar) Deregister(ctx context.Context, in registry.Instance) error {
	return r.regs.Deregister(ctx, in)
}

// Close stops every refresh without deleting anything (the records age
// out within MaxAge) and closes the connection unless it came from
// Config.Conn. Calling Close again does nothing.
func (r *Registrar) Close() error {
	r.s.close()
	return nil
}

// create opens the bucket, puts value at k for a new entry and sets the
// entry's refresh interval to a third of the bucket's MaxAge.
func (r *Registrar) create(ctx context.Context, k string, _ registry.Instance, value []byte) (*entry, error) {
	ctx, cancel := r.s.requestContext(ctx)
	defer cancel()
	kv, err := r.s.bucket(ctx)
	if err != nil {
		return nil, err
	}
	e := &entry{key: k, kv: kv, every: r.s.cfg.TTL / 3}
	if err := r.put(ctx, e, value); err != nil {
		return nil, err
	}
	if st, err := kv.Status(ctx); err == nil && st.TTL() > 0 {
		e.every = st.TTL() / 3
	} else if err == nil {
		r.s.log.Warn("bucket has no MaxAge: records of dead servers never expire", "bucket", r.s.cfg.Bucket)
	}
	return e, nil
}

// write puts value at e's key.
func (r *Registrar) write(ctx context.Context, _ string, e *entry, value []byte) error {
	ctx, cancel := r.s.requestContext(ctx)
	defer cancel()
	return r.put(ctx, e, value)
}

// put puts value at e's key and keeps it for the refreshes.
func (r *Registrar) put(ctx context.Context, e *entry, value []byte) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, err := e.kv.Put(ctx, e.key, value); err != nil {
		return err
	}
	e.value = value
	return nil
}

// delete deletes k from the bucket; an absent key is not an error.
func (r *Registrar) delete(ctx context.Context, k string, _ registry.Instance, _ *entry) error {
	ctx, cancel := r.s.requestContext(ctx)
	defer cancel()
	kv, err := r.s.bucket(ctx)
	if err == nil {
		err = kv.Delete(ctx, k)
	}
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return err
	}
	return nil
}

// keep puts e's record again every e.every until ctx ends.
func (r *Registrar) keep(ctx context.Context, e *entry) {
	t := time.NewTicker(max(e.every, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := r.s.requestContext(ctx)
		e.mu.Lock()
		_, err := e.kv.Put(rctx, e.key, e.value)
		e.mu.Unlock()
		cancel()
		if err != nil && ctx.Err() == nil {
			r.s.log.Warn("refresh failed", "key", e.key, "err", err)
		}
	}
}

// Discovery reads instances from the bucket and watches them. It is safe
// for concurrent use.
type Discovery struct {
	s     *store
	cache regutil.Cache
}

// NewDiscovery returns a Discovery using cfg. It connects in the
// background: NATS need not be reachable yet.
func NewDiscovery(cfg Config) (*Discovery, error) {
	s, err := newStore(cfg)
	if err != nil {
		return nil, err
	}
	return &Discovery{s: s}, nil
}

// apply records a watch entry in m.
func (d *Discovery) apply(m map[string]registry.Instance, service string, e jetstream.KeyValueEntry) {
	if e.Operation() != jetstream.KeyValuePut {
		delete(m, e.Key())
		return
	}
	in, err := regutil.Decode(e.Value(), service)
	if err != nil {
		d.s.log.Warn("skipping bad record", "key", e.Key(), "err", err)
		delete(m, e.Key())
		return
	}
	m[e.Key()] = in
}

// stop ends a kv watch, draining its channel so its subscription's
// callback, which may be blocked sending to it, can exit.
func stop(w jetstream.KeyWatcher) {
	w.Stop()
	timeout := time.NewTimer(5 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case _, ok := <-w.Updates():
			if !ok {
				return
			}
		case <-timeout.C:
			return
		}
	}
}

// read returns the current instances of service.
func (d *Discovery) read(ctx context.Context, service string) ([]registry.Instance, error) {
	kv, err := d.s.bucket(ctx)
	if err != nil {
		return nil, err
	}
	w, err := kv.Watch(ctx, filter(service), jetstream.IgnoreDeletes())
	if err != nil {
		return nil, err
	}
	defer stop(w)
	m := make(map[string]registry.Instance)
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil, errors.New("watch closed")
			}
			if e == nil {
				return regutil.List(m), nil
			}
			d.apply(m, service, e)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Instances returns the instances of service sorted by Key. When NATS
// cannot be reached within ctx and RequestTimeout it returns the last
// list this Discovery saw for service, if any. It fails for an invalid
// service name and with registry.ErrClosed after Close.
func (d *Discovery) Instances(ctx context.Context, service string) ([]registry.Instance, error) {
	if err := regutil.ValidateService(service); err != nil {
		return nil, err
	}
	if d.s.life.Closed() {
		return nil, fmt.Errorf("nats: instances of %q: %w", service, registry.ErrClosed)
	}
	rctx, cancel := d.s.requestContext(ctx)
	defer cancel()
	list, err := d.read(rctx, service)
	if err != nil {
		return d.cache.Fallback(ctx, service, fmt.Errorf("nats: instances of %q: %w", service, err), d.s.log)
	}
	d.cache.Put(service, list)
	return list, nil
}

// Watch delivers the full, sorted list of service's instances: first the
// current one, then after every put or delete, after every PollInterval
// that finds it changed, and again when NATS is reachable after having
// not been. Nothing is delivered while NATS cannot be reached. It fails
// for an invalid service name and with registry.ErrClosed after Close.
func (d *Discovery) Watch(ctx context.Context, service string) (<-chan []registry.Instance, error) {
	return d.s.life.Watch(ctx, service, func(ctx context.Context, feed *regutil.Feed) {
		d.watch(ctx, service, feed)
	})
}

func (d *Discovery) watch(ctx context.Context, service string, feed *regutil.Feed) {
	var (
		bo   regutil.Backoff
		down = true // nothing delivered yet: the first list is forced
	)
	for ctx.Err() == nil {
		ok, err := d.cycle(ctx, service, feed, down)
		if ok {
			down = false
			bo.Reset()
			continue
		}
		if ctx.Err() != nil {
			return
		}
		if !down {
			d.s.log.Warn("watch: NATS unreachable; keeping the last list", "service", service, "err", err)
		}
		down = true
		regutil.Sleep(ctx, bo.Next())
	}
}

// cycle runs one kv.Watch of service for PollInterval: it publishes the
// initial values (forced when force is set) and then every change. It
// reports whether the initial values arrived.
func (d *Discovery) cycle(ctx context.Context, service string, feed *regutil.Feed, force bool) (bool, error) {
	kv, err := d.s.bucket(ctx)
	if err != nil {
		return false, err
	}
	// The watch's subscription lives as long as the context it is
	// created with: end it with the cycle.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := kv.Watch(cctx, filter(service))
	if err != nil {
		return false, err
	}
	defer stop(w)
	timer := time.NewTimer(d.s.cfg.PollInterval)
	defer timer.Stop()
	m := make(map[string]registry.Instance)
	initial := true
	for {
		select {
		case <-ctx.Done():
			return !initial, ctx.Err()
		case <-timer.C:
			if initial {
				return false, errors.New("no initial values within the poll interval")
			}
			return true, nil
		case e, ok := <-w.Updates():
			if !ok {
				return !initial, errors.New("watch closed")
			}
			if e != nil {
				d.apply(m, service, e)
				if initial {
					continue
				}
			}
			list := regutil.List(m)
			d.cache.Put(service, list)
			feed.Publish(list, initial && force)
			initial = false
		}
	}
}

// Close ends every watch and closes the connection unless it came from
// Config.Conn. Calling Close again does nothing.
func (d *Discovery) Close() error {
	d.s.close()
	return nil
}

// Services returns the names of the services with at least one record in
// the bucket, sorted; records that do not decode, or whose service is not
// the one their key names, are skipped. It fails when NATS cannot be
// reached within ctx and RequestTimeout, and with registry.ErrClosed
// after Close.
func (d *Discovery) Services(ctx context.Context) ([]string, error) {
	if d.s.life.Closed() {
		return nil, fmt.Errorf("nats: services: %w", registry.ErrClosed)
	}
	rctx, cancel := d.s.requestContext(ctx)
	defer cancel()
	kv, err := d.s.bucket(rctx)
	if err != nil {
		return nil, fmt.Errorf("nats: services: %w", err)
	}
	w, err := kv.WatchAll(rctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("nats: services: %w", err)
	}
	defer stop(w)
	set := make(map[string]struct{})
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil, errors.New("nats: services: watch closed")
			}
			if e == nil {
				return regutil.Names(set), nil
			}
			if e.Operation() != jetstream.KeyValuePut {
				continue
			}
			tok, _, _ := strings.Cut(e.Key(), ".")
			service, err := DecodeToken(tok)
			if err == nil {
				_, err = regutil.Decode(e.Value(), service)
			}
			if err != nil {
				d.s.log.Warn("skipping bad record", "key", e.Key(), "err", err)
				continue
			}
			set[service] = struct{}{}
		case <-rctx.Done():
			return nil, fmt.Errorf("nats: services: %w", rctx.Err())
		}
	}
}

var _ registry.ServiceLister = (*Discovery)(nil)
