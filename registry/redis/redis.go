package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/registry/internal/regutil"
)

// Config configures a Registrar or a Discovery. The zero value talks to
// Redis at 127.0.0.1:6379, database 0, with the defaults below.
type Config struct {
	// Addr is the Redis server's "host:port". Default "127.0.0.1:6379".
	// Ignored when Client is set.
	Addr string
	// Username and Password authenticate to Redis (ACL user, or only
	// Password for requirepass).
	Username, Password string
	// DB is the database number. Default 0.
	DB int
	// Client, when set, is used instead of dialing Addr; Close leaves it
	// open. DB must then name the client's database (for the keyspace
	// notification channel).
	Client goredis.UniversalClient
	// Prefix starts every key and channel name. Default
	// "fleet:services".
	Prefix string
	// PolicyPrefix starts the key (and notification channel) of each
	// service's policy document a PolicyStore keeps:
	// PolicyPrefix + ":" + service. Default "fleet:policies".
	PolicyPrefix string
	// TTL is the expiry of a record, refreshed every TTL/3: a dead
	// Registrar's records outlive it by at most TTL. Default 10s.
	TTL time.Duration
	// PollInterval is how often a Watch reads the service's keys again to
	// see expiries. Default TTL/2.
	PollInterval time.Duration
	// KeyspaceEvents makes a Discovery's first Watch add "Kx" to the
	// server's notify-keyspace-events (CONFIG SET, when permitted) so
	// that expiries are seen at once instead of at the next poll. The
	// setting is server-wide; other flags already set are kept.
	KeyspaceEvents bool
	// Logger receives the backend's logs. Default slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Addr == "" {
		c.Addr = "127.0.0.1:6379"
	}
	if c.Prefix == "" {
		c.Prefix = "fleet:services"
	}
	if c.PolicyPrefix == "" {
		c.PolicyPrefix = "fleet:policies"
	}
	if c.TTL <= 0 {
		c.TTL = 10 * time.Second
	}
	if c.PollInterval <= 0 {
		c.PollInterval = c.TTL / 2
	}
	c.Logger = regutil.Logger(c.Logger, "redis")
	return c
}

func (c Config) client() (goredis.UniversalClient, bool) {
	if c.Client != nil {
		return c.Client, false
	}
	return goredis.NewClient(&goredis.Options{
		Addr:     c.Addr,
		Username: c.Username,
		Password: c.Password,
		DB:       c.DB,
	}), true
}

// channel is the service's notification channel.
func (c Config) channel(service string) string { return c.Prefix + ":" + service }

func (c Config) key(in registry.Instance) string {
	return c.channel(in.Service) + ":" + in.Key()
}

// match is the SCAN MATCH pattern of the service's keys.
func (c Config) match(service string) string {
	return escapeGlob(c.channel(service)+":") + "*"
}

// keyspace is the pattern of the keyspace notification channels of the
// service's keys.
func (c Config) keyspace(service string) string {
	return "__keyspace@" + strconv.Itoa(c.DB) + "__:" + c.match(service)
}

// escapeGlob escapes the characters special in Redis glob patterns.
func escapeGlob(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

var (
	_ registry.Registrar = (*Registrar)(nil)
	_ registry.Discovery = (*Discovery)(nil)
)

// Registrar records instances as expiring Redis keys and refreshes them.
// It is safe for concurrent use; Register, Update and Deregister are
// serialized.
type Registrar struct {
	cfg    Config
	client goredis.UniversalClient
	own    bool
	log    *slog.Logger
	life   *regutil.Life
	regs   *regutil.Registrations[*entry]
}

// entry is one registered instance.
type entry struct {
	key, channel, id string

	mu    sync.Mutex // guards value; serializes writes of key
	value []byte
}

// NewRegistrar returns a Registrar using cfg. It does not connect yet:
// Redis need not be reachable.
func NewRegistrar(cfg Config) (*Registrar, error) {
	cfg = cfg.withDefaults()
	cli, own := cfg.client()
	r := &Registrar{
		cfg:    cfg,
		client: cli,
		own:    own,
		log:    cfg.Logger,
		life:   regutil.NewLife(),
	}
	r.regs = &regutil.Registrations[*entry]{
		Backend: "redis",
		Life:    r.life,
		Key:     cfg.key,
		Create:  r.create,
		Write:   r.write,
		Keep:    r.keep,
		Delete:  r.delete,
	}
	return r, nil
}

// Register sets in's key to its record with an expiry of TTL, publishes
// "register", and refreshes the expiry every TTL/3. Registering the same
// service and Key again replaces the record. It fails for an invalid
// instance, when Redis does not answer within ctx and with
// registry.ErrClosed after Close.
func (r *Registrar) Register(ctx context.Context, in registry.Instance) error {
	return r.regs.Register(ctx, in)
}

// Update sets in's key to its new record and publishes "update". It
// fails with registry.ErrNotRegistered for an instance r has not
// registered.
func (r *Registrar) Update(ctx context.Context, in registry.Instance) error {
	return r.regs.Update(ctx, in)
}

// Deregister stops refreshing in's key, deletes it and publishes
// "deregister". Deregistering an instance r did not register deletes its
// key too; an absent key is not an error. When Redis cannot be reached
// the refresh is stopped all the same, so the record expires within TTL.
func (r *Registrar) Deregister(ctx context.Context, in registry.Instance) error {
	return r.regs.Deregister(ctx, in)
}

// Close stops every refresh without deleting anything (the records
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

// create sets key to value for a new entry of in and publishes
// "register".
func (r *Registrar) create(ctx context.Context, key string, in registry.Instance, value []byte) (*entry, error) {
	e := &entry{key: key, channel: r.cfg.channel(in.Service), id: in.Key()}
	if err := r.write(ctx, "register", e, value); err != nil {
		return nil, err
	}
	return e, nil
}

// write sets e's key to value and publishes op.
func (r *Registrar) write(ctx context.Context, op string, e *entry, value []byte) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := r.client.Set(ctx, e.key, value, r.cfg.TTL).Err(); err != nil {
		return err
	}
	e.value = value
	r.publish(ctx, e.channel, op, e.id)
	return nil
}

// delete deletes key and publishes "deregister".
func (r *Registrar) delete(ctx context.Context, key string, in registry.Instance, _ *entry) error {
	if err := r.client.Del(ctx, key).Err(); err != nil {
		return err
	}
	r.publish(ctx, r.cfg.channel(in.Service), "deregister", in.Key())
	return nil
}

// publish notifies watchers; a failure only delays them to their next
// poll, so it is logged, not returned.
func (r *Registrar) publish(ctx context.Context, channel, op, id string) {
	if err := r.client.Publish(ctx, channel, op+" "+id).Err(); err != nil {
		r.log.Debug("publish failed", "channel", channel, "op", op, "err", err)
	}
}

// keep refreshes e's expiry every TTL/3 until ctx ends, setting the key
// again when it is gone.
func (r *Registrar) keep(ctx context.Context, e *entry) {
	t := time.NewTicker(max(r.cfg.TTL/3, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.refresh(ctx, e)
	}
}

func (r *Registrar) refresh(ctx context.Context, e *entry) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ok, err := r.client.Expire(ctx, e.key, r.cfg.TTL).Result()
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("refresh failed", "key", e.key, "err", err)
		}
		return
	}
	if ok {
		return
	}
	if err := r.client.Set(ctx, e.key, e.value, r.cfg.TTL).Err(); err != nil {
		if ctx.Err() == nil {
			r.log.Warn("restoring a lost record failed", "key", e.key, "err", err)
		}
		return
	}
	r.log.Info("record was gone; set it again", "key", e.key)
	r.publish(ctx, e.channel, "restore", e.id)
}

// Discovery reads instances from Redis and watches them. It is safe for
// concurrent use.
type Discovery struct {
	cfg      Config
	client   goredis.UniversalClient
	own      bool
	log      *slog.Logger
	life     *regutil.Life
	cache    regutil.Cache
	keyspace sync.Once
}

// NewDiscovery returns a Discovery using cfg. It does not connect yet:
// Redis need not be reachable.
func NewDiscovery(cfg Config) (*Discovery, error) {
	cfg = cfg.withDefaults()
	cli, own := cfg.client()
	return &Discovery{cfg: cfg, client: cli, own: own, log: cfg.Logger, life: regutil.NewLife()}, nil
}

// read scans the keys of service and reads their records.
func (d *Discovery) read(ctx context.Context, service string) ([]registry.Instance, error) {
	var keys []string
	it := d.client.Scan(ctx, 0, d.cfg.match(service), 256).Iterator()
	for it.Next(ctx) {
		keys = append(keys, it.Val())
	}
	if err := it.Err(); err != nil {
		return nil, err
	}
	m := make(map[string]registry.Instance, len(keys))
	if len(keys) == 0 {
		return regutil.List(m), nil
	}
	pipe := d.client.Pipeline()
	cmds := make([]*goredis.StringCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.Get(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
		return nil, err
	}
	for i, cmd := range cmds {
		b, err := cmd.Bytes()
		if errors.Is(err, goredis.Nil) {
			continue // expired or deleted since the scan
		}
		if err != nil {
			return nil, err
		}
		in, err := registry.Unmarshal(b)
		if err != nil {
			d.log.Warn("skipping bad record", "key", keys[i], "err", err)
			continue
		}
		if in.Service != service {
			continue // a service whose name extends this one's past a ':'
		}
		m[in.Key()] = in
	}
	return regutil.List(m), nil
}

// Instances returns the instances of service sorted by Key. When Redis
// cannot be reached within ctx it returns the last list this Discovery saw
// for service, if any. It fails for an invalid service name and with
// registry.ErrClosed after Close.
func (d *Discovery) Instances(ctx context.Context, service string) ([]registry.Instance, error) {
	if err := regutil.ValidateService(service); err != nil {
		return nil, err
	}
	if d.life.Closed() {
		return nil, fmt.Errorf("redis: instances of %q: %w", service, registry.ErrClosed)
	}
	list, err := d.read(ctx, service)
	if err != nil {
		return d.cache.Fallback(ctx, service, fmt.Errorf("redis: instances of %q: %w", service, err), d.log)
	}
	d.cache.Put(service, list)
	return list, nil
}

// enableKeyspaceEvents adds "K" and "x" to notify-keyspace-events.
func (d *Discovery) enableKeyspaceEvents(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cur, err := d.client.ConfigGet(ctx, "notify-keyspace-events").Result()
	if err != nil {
		d.log.Info("keyspace notifications unavailable; relying on polling", "err", err)
		return
	}
	flags := cur["notify-keyspace-events"]
	want := flags
	if !strings.Contains(want, "K") {
		want += "K"
	}
	if !strings.Contains(want, "x") && !strings.Contains(want, "A") {
		want += "x"
	}
	if want == flags {
		return
	}
	if err := d.client.ConfigSet(ctx, "notify-keyspace-events", want).Err(); err != nil {
		d.log.Info("keyspace notifications unavailable; relying on polling", "err", err)
		return
	}
	d.log.Info("enabled keyspace notifications", "notify-keyspace-events", want)
}

// Watch delivers the full, sorted list of service's instances: first the
// current one, then after every notification or poll that finds it
// changed, and again when Redis is reachable after having not been.
// Nothing is delivered while Redis cannot be reached. It fails for an
// invalid service name and with registry.ErrClosed after Close.
func (d *Discovery) Watch(ctx context.Context, service string) (<-chan []registry.Instance, error) {
	return d.life.Watch(ctx, service, func(ctx context.Context, feed *regutil.Feed) {
		d.watch(ctx, service, feed)
	})
}

func (d *Discovery) watch(ctx context.Context, service string, feed *regutil.Feed) {
	if d.cfg.KeyspaceEvents {
		d.keyspace.Do(func() { d.enableKeyspaceEvents(ctx) })
	}
	ps := d.client.Subscribe(ctx, d.cfg.channel(service))
	ps.PSubscribe(ctx, d.cfg.keyspace(service))
	defer ps.Close()
	msgs := ps.ChannelWithSubscriptions(goredis.WithChannelSize(64))
	const initialSubs = 2 // the channel and the keyspace pattern

	var (
		subs   int
		down   = true // nothing delivered yet: the first read is forced
		ticker = time.NewTicker(d.cfg.PollInterval)
	)
	defer ticker.Stop()
	refresh := func(force bool) {
		list, err := d.read(ctx, service)
		if err != nil {
			if ctx.Err() == nil && !down {
				d.log.Warn("watch: Redis unreachable; keeping the last list", "service", service, "err", err)
			}
			down = true
			return
		}
		d.cache.Put(service, list)
		feed.Publish(list, force || down)
		down = false
	}
	refresh(true)
	for {
		force := false
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		case m, ok := <-msgs:
			if !ok {
				return
			}
			// Take every message already queued: one read covers them.
			for more := true; more; {
				if _, isSub := m.(*goredis.Subscription); isSub {
					subs++
					if subs > initialSubs {
						force = true // resubscribed after a reconnection
					}
				}
				select {
				case m, more = <-msgs:
					if !more {
						return
					}
				default:
					more = false
				}
			}
		}
		refresh(force)
	}
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
// not the one their key names, are skipped. It fails when Redis cannot be
// reached within ctx, and with registry.ErrClosed after Close.
func (d *Discovery) Services(ctx context.Context) ([]string, error) {
	if d.life.Closed() {
		return nil, fmt.Errorf("redis: services: %w", registry.ErrClosed)
	}
	var keys []string
	it := d.client.Scan(ctx, 0, escapeGlob(d.cfg.Prefix+":")+"*", 256).Iterator()
	for it.Next(ctx) {
		keys = append(keys, it.Val())
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("redis: services: %w", err)
	}
	set := make(map[string]struct{})
	if len(keys) == 0 {
		return regutil.Names(set), nil
	}
	pipe := d.client.Pipeline()
	cmds := make([]*goredis.StringCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.Get(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
		return nil, fmt.Errorf("redis: services: %w", err)
	}
	for i, cmd := range cmds {
		b, err := cmd.Bytes()
		if errors.Is(err, goredis.Nil) {
			continue // expired or deleted since the scan
		}
		if err != nil {
			return nil, fmt.Errorf("redis: services: %w", err)
		}
		in, err := registry.Unmarshal(b)
		if err != nil || keys[i] != d.cfg.key(in) {
			d.log.Warn("skipping bad record", "key", keys[i], "err", err)
			continue
		}
		set[in.Service] = struct{}{}
	}
	return regutil.Names(set), nil
}

var _ registry.ServiceLister = (*Discovery)(nil)
