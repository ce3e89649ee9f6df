package etcd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"

	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/registry/internal/regutil"
)

// Config configures a Registrar or a Discovery. The zero value talks to
// etcd at 127.0.0.1:2379 with the defaults below.
type Config struct {
	// Endpoints are etcd's client URLs ("http://host:2379") or
	// "host:port"s. Default ["127.0.0.1:2379"]. Ignored when Client is
	// set.
	Endpoints []string
	// Client, when set, is used instead of dialing Endpoints; Close
	// leaves it open.
	Client *clientv3.Client
	// Username and Password authenticate to etcd when Username is set.
	Username, Password string
	// TLS, when set, is the client's TLS configuration.
	TLS *tls.Config
	// DialTimeout bounds the first connection. Default 5s.
	DialTimeout time.Duration
	// Prefix is the key prefix under which services are stored, without
	// a trailing '/'. Default "/fleet/services".
	Prefix string
	// PolicyPrefix is the key prefix of the policy documents a
	// PolicyStore keeps, one key per service ("/fleet/policies/Echo"),
	// without a trailing '/'. Default "/fleet/policies".
	PolicyPrefix string
	// TTL is the lease time to live, rounded up to whole seconds (etcd's
	// unit); a record outlives a dead Registrar by at most this much.
	// etcd may raise very short TTLs to its minimum (about 2s with
	// default server settings). Default 10s.
	TTL time.Duration
	// RequestTimeout bounds each request to etcd when the caller's
	// context has no earlier deadline. Default 5s.
	RequestTimeout time.Duration
	// Logger receives the backend's and the etcd client's logs.
	// Default slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if len(c.Endpoints) == 0 {
		c.Endpoints = []string{"127.0.0.1:2379"}
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = 5 * time.Second
	}
	if c.Prefix == "" {
		c.Prefix = "/fleet/services"
	}
	c.Prefix = strings.TrimRight(c.Prefix, "/")
	if c.PolicyPrefix == "" {
		c.PolicyPrefix = "/fleet/policies"
	}
	c.PolicyPrefix = strings.TrimRight(c.PolicyPrefix, "/")
	if c.TTL <= 0 {
		c.TTL = 10 * time.Second
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 5 * time.Second
	}
	c.Logger = regutil.Logger(c.Logger, "etcd")
	return c
}

// client returns the configured client or dials one; own reports whether
// Close must close it.
func (c Config) client() (cli *clientv3.Client, own bool, err error) {
	if c.Client != nil {
		return c.Client, false, nil
	}
	cli, err = clientv3.New(clientv3.Config{
		Endpoints:   c.Endpoints,
		DialTimeout: c.DialTimeout,
		Username:    c.Username,
		Password:    c.Password,
		TLS:         c.TLS,
		Logger:      zapLogger(c.Logger),
		// Reconnect quickly after an etcd restart: gRPC's default
		// backoff grows to two minutes.
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 250 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 3 * time.Second},
			MinConnectTimeout: c.DialTimeout,
		})},
	})
	if err != nil {
		return nil, false, fmt.Errorf("etcd: connect to %v: %w", c.Endpoints, err)
	}
	return cli, true, nil
}

// servicePrefix is the prefix of every key of service, ending in '/'.
func (c Config) servicePrefix(service string) string {
	return c.Prefix + "/" + service + "/"
}

func (c Config) key(in registry.Instance) string {
	return c.servicePrefix(in.Service) + in.Key()
}

// requestContext bounds ctx by RequestTimeout.
func (c Config) requestContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.RequestTimeout)
}

var (
	_ registry.Registrar = (*Registrar)(nil)
	_ registry.Discovery = (*Discovery)(nil)
)

// Registrar records instances in etcd, each under its own lease kept
// alive until Deregister or Close and re-created by itself when lost. It
// is safe for concurrent use; Register, Update and Deregister are
// serialized.
type Registrar struct {
	cfg    Config
	client *clientv3.Client
	own    bool
	log    *slog.Logger
	life   *regutil.Life
	ttl    int64 // seconds
	regs   *regutil.Registrations[*entry]
}

// entry is one registered instance.
type entry struct {
	key string

	mu    sync.Mutex // guards value and lease; serializes writes of key
	value string
	lease clientv3.LeaseID
}

// NewRegistrar returns a Registrar using cfg. It fails only when the
// client cannot be created; etcd need not be reachable yet.
func NewRegistrar(cfg Config) (*Registrar, error) {
	cfg = cfg.withDefaults()
	cli, own, err := cfg.client()
	if err != nil {
		return nil, err
	}
	r := &Registrar{
		cfg:    cfg,
		client: cli,
		own:    own,
		log:    cfg.Logger,
		life:   regutil.NewLife(),
		ttl:    max(1, int64(math.Ceil(cfg.TTL.Seconds()))),
	}
	r.regs = &regutil.Registrations[*entry]{
		Backend: "etcd",
		Life:    r.life,
		Key:     cfg.key,
		Create:  r.create,
		Write:   r.write,
		Keep:    r.keep,
		Delete:  r.delete,
	}
	return r, nil
}

// Register grants a lease, puts in's record under it and keeps the lease
// alive. Registering the same service and Key again puts the new record
// under the existing lease. It fails for an invalid instance, when etcd
// does not answer within ctx and RequestTimeout, and with
// registry.ErrClosed after Close.
func (r *Registrar) Register(ctx context.Context, in registry.Instance) error {
	return r.regs.Register(ctx, in)
}

// Update puts in's new record under its lease. It fails with
// registry.ErrNotRegistered for an instance r has not registered.
func (r *Registrar) Update(ctx context.Context, in registry.Instance) error {
	return r.regs.Update(ctx, in)
}

// Deregister stops keeping in's lease alive, deletes its key and revokes
// the lease. Deregistering an instance r did not register deletes its key
// too; an absent key is not an error. When etcd cannot be reached the
// keep-alive is stopped all the same, so the record expires within TTL.
func (r *Registrar) Deregister(ctx context.Context, in registry.Instance) error {
	return r.regs.Deregister(ctx, in)
}

// Close stops every keep-alive without deleting anything (the records
// expire TTL later) and closes the client unless it came from
// Config.Client. Calling Close again does nothing.
func (r *Registrar) Close() error {
	if !r.life.Close() {
		return nil
	}
	if r.own {
		return r.client.Close()
	}
	return nil
}

// create grants a lease for the new entry of key and puts value under it.
func (r *Registrar) create(ctx context.Context, key string, _ registry.Instance, value []byte) (*entry, error) {
	ctx, cancel := r.cfg.requestContext(ctx)
	defer cancel()
	e := &entry{key: key, value: string(value)}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := r.grantAndPut(ctx, e); err != nil {
		return nil, err
	}
	return e, nil
}

// write puts value under e's lease, or under a new lease when etcd no
// longer knows e's.
func (r *Registrar) write(ctx context.Context, _ string, e *entry, value []byte) error {
	ctx, cancel := r.cfg.requestContext(ctx)
	defer cancel()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.value = string(value)
	_, err := r.client.Put(ctx, e.key, e.value, clientv3.WithLease(e.lease))
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return r.grantAndPut(ctx, e)
	}
	return err
}

// delete deletes key and revokes the lease of e, the entry of key if it
// was registered (else nil), whose keep-alive has stopped.
func (r *Registrar) delete(ctx context.Context, key string, _ registry.Instance, e *entry) error {
	ctx, cancel := r.cfg.requestContext(ctx)
	defer cancel()
	if _, err := r.client.Delete(ctx, key); err != nil {
		return err
	}
	if e != nil && e.lease != 0 {
		if _, err := r.client.Revoke(ctx, e.lease); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			r.log.Debug("revoke failed", "key", key, "lease", int64(e.lease), "err", err)
		}
	}
	return nil
}

// grantAndPut grants a new lease and puts e's value under it. The caller
// holds e.mu.
func (r *Registrar) grantAndPut(ctx context.Context, e *entry) error {
	g, err := r.client.Grant(ctx, r.ttl)
	if err != nil {
		return err
	}
	if _, err := r.client.Put(ctx, e.key, e.value, clientv3.WithLease(g.ID)); err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		r.client.Revoke(rctx, g.ID)
		cancel()
		return err
	}
	// A previous lease, if any, is lost or about to expire unattended;
	// the key has moved off it, so its expiry deletes nothing.
	e.lease = g.ID
	return nil
}

// keep keeps e's lease alive until ctx ends, re-registering e under a new
// lease whenever the lease is lost.
func (r *Registrar) keep(ctx context.Context, e *entry) {
	bo := regutil.Backoff{Min: 200 * time.Millisecond, Max: max(time.Second, r.cfg.TTL/3)}
	for {
		e.mu.Lock()
		lease := e.lease
		e.mu.Unlock()
		ka, err := r.client.KeepAlive(ctx, lease)
		if err == nil {
			for range ka {
			}
		}
		if ctx.Err() != nil {
			return
		}
		e.mu.Lock()
		replaced := e.lease != lease
		e.mu.Unlock()
		if replaced { // Update already moved the key to a new lease
			continue
		}
		r.log.Warn("lease lost; registering again", "key", e.key, "lease", int64(lease), "err", err)
		for {
			if !regutil.Sleep(ctx, bo.Next()) {
				return
			}
			rctx, cancel := r.cfg.requestContext(ctx)
			e.mu.Lock()
			if e.lease != lease {
				e.mu.Unlock()
				cancel()
				break
			}
			err := r.grantAndPut(rctx, e)
			newLease := e.lease
			e.mu.Unlock()
			cancel()
			if err == nil {
				r.log.Info("registered again", "key", e.key, "lease", int64(newLease))
				bo.Reset()
				break
			}
			if ctx.Err() != nil {
				return
			}
			r.log.Debug("re-registration failed; retrying", "key", e.key, "err", err)
		}
	}
}

// Discovery reads instances from etcd and watches them. It is safe for
// concurrent use.
type Discovery struct {
	cfg    Config
	client *clientv3.Client
	own    bool
	log    *slog.Logger
	life   *regutil.Life
	cache  regutil.Cache
	// reconnected fires when the client's connection is ready again
	// after having been lost.
	reconnected regutil.Signal
}

// NewDiscovery returns a Discovery using cfg. It fails only when the
// client cannot be created; etcd need not be reachable yet.
func NewDiscovery(cfg Config) (*Discovery, error) {
	cfg = cfg.withDefaults()
	cli, own, err := cfg.client()
	if err != nil {
		return nil, err
	}
	d := &Discovery{cfg: cfg, client: cli, own: own, log: cfg.Logger, life: regutil.NewLife()}
	d.life.Go(d.monitor)
	return d, nil
}

// monitor fires d.reconnected each time the client's connection becomes
// ready after having been ready and then lost.
func (d *Discovery) monitor() {
	conn := d.client.ActiveConnection()
	if conn == nil {
		return
	}
	ctx := d.life.Context()
	state := conn.GetState()
	everReady, lost := state == connectivity.Ready, false
	for conn.WaitForStateChange(ctx, state) {
		if state == connectivity.Ready {
			lost = true
		}
		state = conn.GetState()
		if state == connectivity.Ready {
			if everReady && lost {
				d.log.Info("connection to etcd restored; resynchronizing watches")
				d.reconnected.Fire()
			}
			everReady, lost = true, false
		}
	}
}

// read gets the instances of service and the revision they were read at.
// Records that do not decode are skipped and logged.
func (d *Discovery) read(ctx context.Context, service string) (*regutil.Sorted, int64, error) {
	resp, err := d.client.Get(ctx, d.cfg.servicePrefix(service), clientv3.WithPrefix())
	if err != nil {
		return nil, 0, err
	}
	recs := make([]string, 0, len(resp.Kvs))
	ins := make([]registry.Instance, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		if in, ok := d.decode(service, string(kv.Key), kv.Value); ok {
			recs, ins = append(recs, string(kv.Key)), append(ins, in)
		}
	}
	return regutil.NewSorted(recs, ins), resp.Header.Revision, nil
}

// decode decodes the record under key, logging it when it is bad.
func (d *Discovery) decode(service, key string, value []byte) (registry.Instance, bool) {
	in, err := regutil.Decode(value, service)
	if err != nil {
		d.log.Warn("skipping bad record", "key", key, "err", err)
		return registry.Instance{}, false
	}
	return in, true
}

// Instances returns the instances of service sorted by Key. When etcd
// cannot be reached within ctx and RequestTimeout it returns the last
// list this Discovery saw for service, if any. It fails for an invalid
// service name and with registry.ErrClosed after Close.
func (d *Discovery) Instances(ctx context.Context, service string) ([]registry.Instance, error) {
	if err := regutil.ValidateService(service); err != nil {
		return nil, err
	}
	if d.life.Closed() {
		return nil, fmt.Errorf("etcd: instances of %q: %w", service, registry.ErrClosed)
	}
	rctx, cancel := d.cfg.requestContext(ctx)
	defer cancel()
	set, _, err := d.read(rctx, service)
	if err != nil {
		return d.cache.Fallback(ctx, service, fmt.Errorf("etcd: instances of %q: %w", service, err), d.log)
	}
	list := set.List() // fresh: this read's own
	d.cache.Put(service, list)
	return list, nil
}

// Watch delivers the full, sorted list of service's instances: first the
// current one, then after each change, and again after a resync (watch
// error, compaction, reconnection). Each list is the receiver's own slice,
// but its instances' Tags and Meta are shared with later lists and the
// Discovery's state: read them, do not modify them. An unreachable etcd is retried with
// backoff and nothing is delivered meanwhile. It fails for an invalid
// service name and with registry.ErrClosed after Close.
func (d *Discovery) Watch(ctx context.Context, service string) (<-chan []registry.Instance, error) {
	return d.life.Watch(ctx, service, func(ctx context.Context, feed *regutil.Feed) {
		d.watch(ctx, service, feed)
	})
}

func (d *Discovery) watch(ctx context.Context, service string, feed *regutil.Feed) {
	prefix := d.cfg.servicePrefix(service)
	var bo regutil.Backoff
	for ctx.Err() == nil {
		reconnected := d.reconnected.C()
		rctx, cancel := d.cfg.requestContext(ctx)
		set, rev, err := d.read(rctx, service)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			d.log.Debug("watch: get failed; retrying", "service", service, "err", err)
			select {
			case <-time.After(bo.Next()):
			case <-reconnected:
			case <-ctx.Done():
				return
			}
			continue
		}
		bo.Reset()
		d.publish(service, set, feed)

		wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		wch := d.client.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
		d.follow(ctx, service, set, wch, reconnected, feed)
		wcancel()
	}
}

// follow applies watch events to set and publishes the list after each
// batch that changed it, until the watch fails, reconnected fires or ctx
// ends. Each event costs O(log n) plus a copy of the list, not a sort.
func (d *Discovery) follow(ctx context.Context, service string, set *regutil.Sorted, wch clientv3.WatchChan, reconnected <-chan struct{}, feed *regutil.Feed) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-reconnected:
			return
		case wr, ok := <-wch:
			if !ok {
				return
			}
			if err := wr.Err(); err != nil || wr.Canceled || wr.CompactRevision != 0 {
				d.log.Info("watch interrupted; resynchronizing", "service", service, "err", err, "compact_revision", wr.CompactRevision)
				return
			}
			changed := false
			for _, ev := range wr.Events {
				key := string(ev.Kv.Key)
				if ev.Type == clientv3.EventTypePut {
					if in, ok := d.decode(service, key, ev.Kv.Value); ok {
						changed = set.Put(key, in) || changed
						continue
					}
				}
				changed = set.Delete(key) || changed // a delete, or a bad record
			}
			if changed {
				d.publish(service, set, feed)
			}
		}
	}
}

// publish records set's list for Instances' fallback and delivers a copy
// of it, the instances' Tags and Meta shared.
func (d *Discovery) publish(service string, set *regutil.Sorted, feed *regutil.Feed) {
	list := set.List()
	d.cache.Share(service, list)
	feed.Send(slices.Clone(list))
}

// Close ends every watch and closes the client unless it came from
// Config.Client. Calling Close again does nothing.
func (d *Discovery) Close() error {
	if !d.life.Close() {
		return nil
	}
	if d.own {
		return d.client.Close()
	}
	return nil
}

// Services returns the names of the services with at least one record
// under Prefix, sorted; records that do not decode, or whose service is
// not the one their key names, are skipped. It fails when etcd cannot be
// reached within ctx and RequestTimeout, and with registry.ErrClosed
// after Close.
func (d *Discovery) Services(ctx context.Context) ([]string, error) {
	if d.life.Closed() {
		return nil, fmt.Errorf("etcd: services: %w", registry.ErrClosed)
	}
	rctx, cancel := d.cfg.requestContext(ctx)
	defer cancel()
	prefix := d.cfg.Prefix + "/"
	resp, err := d.client.Get(rctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("etcd: services: %w", err)
	}
	set := make(map[string]struct{})
	for _, kv := range resp.Kvs {
		service, _, ok := strings.Cut(strings.TrimPrefix(string(kv.Key), prefix), "/")
		if !ok {
			continue
		}
		if _, err := regutil.Decode(kv.Value, service); err != nil {
			d.log.Warn("skipping bad record", "key", string(kv.Key), "err", err)
			continue
		}
		set[service] = struct{}{}
	}
	return regutil.Names(set), nil
}

var _ registry.ServiceLister = (*Discovery)(nil)
