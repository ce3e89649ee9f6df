package zookeeper

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/registry/internal/regutil"
)

// Config configures a Registrar or a Discovery. The zero value talks to
// ZooKeeper at 127.0.0.1:2181 with the defaults below.
type Config struct {
	// Servers are the ZooKeeper servers, "host:port" (port 2181 when
	// omitted). Default ["127.0.0.1:2181"].
	Servers []string
	// Root is the znode under which services are stored. Default
	// "/fleet/services".
	Root string
	// PolicyRoot is the znode under which a PolicyStore keeps one
	// persistent znode per service holding its policy document. Default
	// "/fleet/policies".
	PolicyRoot string
	// SessionTimeout is the session timeout the client asks for; the
	// server clamps it to [2, 20] × its tickTime. A dead Registrar's
	// records outlive it by about this much. Default 10s.
	SessionTimeout time.Duration
	// ACL is the ACL of the znodes created. Default
	// zk.WorldACL(zk.PermAll).
	ACL []zk.ACL
	// Logger receives the backend's and the zk client's logs. Default
	// slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if len(c.Servers) == 0 {
		c.Servers = []string{"127.0.0.1:2181"}
	}
	if c.Root == "" {
		c.Root = "/fleet/services"
	}
	c.Root = "/" + strings.Trim(c.Root, "/")
	if c.PolicyRoot == "" {
		c.PolicyRoot = "/fleet/policies"
	}
	c.PolicyRoot = "/" + strings.Trim(c.PolicyRoot, "/")
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = 10 * time.Second
	}
	if c.ACL == nil {
		c.ACL = zk.WorldACL(zk.PermAll)
	}
	c.Logger = regutil.Logger(c.Logger, "zookeeper")
	return c
}

func (c Config) servicePath(service string) string {
	return path.Join(c.Root, service)
}

// nodePath is the znode of in.
func (c Config) nodePath(in registry.Instance) string {
	return c.servicePath(in.Service) + "/" + url.QueryEscape(in.Key())
}

// connect opens a zk connection whose logs go to c.Logger and whose
// session events go to onEvent (called on zk's goroutines; it must not
// block).
func (c Config) connect(onEvent func(zk.Event)) (*zk.Conn, error) {
	conn, _, err := zk.Connect(c.Servers, c.SessionTimeout,
		zk.WithLogger(zkLogger{c.Logger}),
		zk.WithLogInfo(false),
		zk.WithEventCallback(onEvent),
	)
	if err != nil {
		return nil, fmt.Errorf("zookeeper: connect to %v: %w", c.Servers, err)
	}
	return conn, nil
}

// zkLogger adapts a slog.Logger to zk.Logger. With zk.WithLogInfo(false)
// the client only logs failures, mostly of its reconnect attempts (about
// one a second while a server is unreachable), so they are logged at Info;
// this package logs what they lead to at Warn.
type zkLogger struct{ l *slog.Logger }

func (z zkLogger) Printf(format string, args ...any) {
	z.l.Info("zk: " + fmt.Sprintf(format, args...))
}

var (
	_ registry.Registrar = (*Registrar)(nil)
	_ registry.Discovery = (*Discovery)(nil)
)

// Registrar records instances as ephemeral znodes of its session and
// re-creates them after the session expires. It is safe for concurrent
// use; its writes are serialized.
//
// ZooKeeper requests take no context: Register, Update and Deregister
// check ctx before starting, and a request fails by itself when the
// client cannot reach a server (after one pass over Servers, about a
// second) or the connection stalls (2/3 of the session timeout).
type Registrar struct {
	cfg     Config
	conn    *zk.Conn
	log     *slog.Logger
	life    *regutil.Life
	session chan struct{} // signaled on every new or resumed session

	mu      sync.Mutex // serializes znode writes; guards entries
	entries map[string][]byte
}

// NewRegistrar returns a Registrar using cfg. It connects in the
// background: ZooKeeper need not be reachable yet.
func NewRegistrar(cfg Config) (*Registrar, error) {
	cfg = cfg.withDefaults()
	r := &Registrar{
		cfg:     cfg,
		log:     cfg.Logger,
		life:    regutil.NewLife(),
		session: make(chan struct{}, 1),
		entries: make(map[string][]byte),
	}
	conn, err := cfg.connect(func(ev zk.Event) {
		if ev.Type == zk.EventSession && ev.State == zk.StateHasSession {
			select {
			case r.session <- struct{}{}:
			default:
			}
		}
	})
	if err != nil {
		return nil, err
	}
	r.conn = conn
	r.life.Go(r.restoreLoop)
	return r, nil
}

// Register creates in's ephemeral znode (and the persistent parents),
// replacing a znode another session left at that path; registering the
// same service and Key again replaces the data. It fails for an invalid
// instance, when ZooKeeper cannot be reached and with registry.ErrClosed
// after Close.
func (r *Registrar) Register(ctx context.Context, in registry.Instance) error {
	if err := in.Validate(); err != nil {
		return fmt.Errorf("zookeeper: %w", err)
	}
	data, err := in.Marshal()
	if err != nil {
		return fmt.Errorf("zookeeper: %w", err)
	}
	p := r.cfg.nodePath(in)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.check(ctx); err != nil {
		return fmt.Errorf("zookeeper: register %s: %w", p, err)
	}
	if err := r.ensure(p, data); err != nil {
		return fmt.Errorf("zookeeper: register %s: %w", p, err)
	}
	r.entries[p] = data
	return nil
}

// Update sets the data of in's znode. It fails with
// registry.ErrNotRegistered for an instance r has not registered.
func (r *Registrar) Update(ctx context.Context, in registry.Instance) error {
	if err := in.Validate(); err != nil {
		return fmt.Errorf("zookeeper: %w", err)
	}
	data, err := in.Marshal()
	if err != nil {
		return fmt.Errorf("zookeeper: %w", err)
	}
	p := r.cfg.nodePath(in)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.check(ctx); err != nil {
		return fmt.Errorf("zookeeper: update %s: %w", p, err)
	}
	if _, ok := r.entries[p]; !ok {
		return fmt.Errorf("zookeeper: update %s: %w", p, registry.ErrNotRegistered)
	}
	// Remember the new data first: if the write fails because the
	// session just expired, the restore writes it.
	r.entries[p] = data
	_, err = r.conn.Set(p, data, -1)
	if errors.Is(err, zk.ErrNoNode) {
		err = r.ensure(p, data)
	}
	if err != nil {
		return fmt.Errorf("zookeeper: update %s: %w", p, err)
	}
	return nil
}

// Deregister deletes in's znode, whoever created it, and stops restoring
// it; an absent znode is not an error.
func (r *Registrar) Deregister(ctx context.Context, in registry.Instance) error {
	if err := in.Validate(); err != nil {
		return fmt.Errorf("zookeeper: %w", err)
	}
	p := r.cfg.nodePath(in)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.check(ctx); err != nil {
		return fmt.Errorf("zookeeper: deregister %s: %w", p, err)
	}
	delete(r.entries, p)
	if err := r.conn.Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("zookeeper: deregister %s: %w", p, err)
	}
	return nil
}

// Close closes the session without deleting anything; ZooKeeper removes
// the session's ephemeral znodes at once. Calling Close again does
// nothing.
func (r *Registrar) Close() error {
	if !r.life.Close() {
		return nil
	}
	r.conn.Close()
	return nil
}

// check returns why a write must not start; the caller holds r.mu.
func (r *Registrar) check(ctx context.Context) error {
	if r.life.Closed() {
		return registry.ErrClosed
	}
	return ctx.Err()
}

// ensure makes p an ephemeral znode of the current session holding data.
// The caller holds r.mu.
func (r *Registrar) ensure(p string, data []byte) error {
	for range 5 {
		_, err := r.conn.Create(p, data, zk.FlagEphemeral, r.cfg.ACL)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, zk.ErrNoNode):
			if err := r.createParents(path.Dir(p)); err != nil {
				return err
			}
		case errors.Is(err, zk.ErrNodeExists):
			cur, stat, err := r.conn.Get(p)
			if errors.Is(err, zk.ErrNoNode) {
				continue
			}
			if err != nil {
				return err
			}
			if stat.EphemeralOwner == r.conn.SessionID() {
				if bytes.Equal(cur, data) {
					return nil
				}
				_, err = r.conn.Set(p, data, stat.Version)
				if errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrBadVersion) {
					continue
				}
				return err
			}
			// Left by another session: our own before an expiry, or a
			// previous process of this server. Replace it.
			r.log.Info("replacing a znode of another session", "path", p, "owner", stat.EphemeralOwner)
			err = r.conn.Delete(p, stat.Version)
			if err != nil && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrBadVersion) {
				return err
			}
		default:
			return err
		}
	}
	return fmt.Errorf("znode %s keeps changing", p)
}

// createParents creates dir and its ancestors as persistent znodes.
func (r *Registrar) createParents(dir string) error {
	p := ""
	for _, part := range strings.Split(strings.Trim(dir, "/"), "/") {
		p += "/" + part
		_, err := r.conn.Create(p, nil, zk.FlagPersistent, r.cfg.ACL)
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", p, err)
		}
	}
	return nil
}

// restoreLoop makes sure every registered znode exists each time a
// session is established (a new one after an expiry creates them again),
// retrying with backoff while that fails.
func (r *Registrar) restoreLoop() {
	ctx := r.life.Context()
	var (
		bo    regutil.Backoff
		retry <-chan time.Time
	)
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.session:
		case <-retry:
		}
		retry = nil
		if err := r.restore(); err != nil {
			if ctx.Err() != nil {
				return
			}
			r.log.Warn("restoring znodes failed; retrying", "err", err)
			retry = time.After(bo.Next())
			continue
		}
		bo.Reset()
	}
}

func (r *Registrar) restore() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var first error
	n := 0
	for p, data := range r.entries {
		if r.life.Closed() {
			return registry.ErrClosed
		}
		if err := r.ensure(p, data); err != nil {
			if first == nil {
				first = fmt.Errorf("%s: %w", p, err)
			}
			continue
		}
		n++
	}
	if n > 0 {
		r.log.Debug("znodes checked after (re)connect", "count", n, "session", r.conn.SessionID())
	}
	return first
}

// Discovery reads instances from ZooKeeper and watches them. It is safe
// for concurrent use.
type Discovery struct {
	cfg   Config
	conn  *zk.Conn
	log   *slog.Logger
	life  *regutil.Life
	cache regutil.Cache
	// reconnected fires on every session established after the first:
	// a resumed one after a disconnection or a new one after an expiry.
	reconnected regutil.Signal
	hadSession  atomic.Bool
}

// NewDiscovery returns a Discovery using cfg. It connects in the
// background: ZooKeeper need not be reachable yet.
func NewDiscovery(cfg Config) (*Discovery, error) {
	cfg = cfg.withDefaults()
	d := &Discovery{cfg: cfg, log: cfg.Logger, life: regutil.NewLife()}
	conn, err := cfg.connect(func(ev zk.Event) {
		if ev.Type == zk.EventSession && ev.State == zk.StateHasSession && d.hadSession.Swap(true) {
			d.reconnected.Fire()
		}
	})
	if err != nil {
		return nil, err
	}
	d.conn = conn
	return d, nil
}

// Instances returns the instances of service sorted by Key. When
// ZooKeeper cannot be reached it returns the last list this Discovery saw
// for service, if any. It fails for an invalid service name and with
// registry.ErrClosed after Close.
func (d *Discovery) Instances(ctx context.Context, service string) ([]registry.Instance, error) {
	if err := regutil.ValidateService(service); err != nil {
		return nil, err
	}
	if d.life.Closed() {
		return nil, fmt.Errorf("zookeeper: instances of %q: %w", service, registry.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	list, err := d.read(service)
	if err != nil {
		return d.cache.Fallback(ctx, service, fmt.Errorf("zookeeper: instances of %q: %w", service, err), d.log)
	}
	d.cache.Put(service, list)
	return list, nil
}

func (d *Discovery) read(service string) ([]registry.Instance, error) {
	dir := d.cfg.servicePath(service)
	children, _, err := d.conn.Children(dir)
	if errors.Is(err, zk.ErrNoNode) {
		return []registry.Instance{}, nil
	}
	if err != nil {
		return nil, err
	}
	m := make(map[string]registry.Instance, len(children))
	for _, name := range children {
		data, _, err := d.conn.Get(dir + "/" + name)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if in, ok := d.decode(dir+"/"+name, data, service); ok {
			m[name] = in
		}
	}
	return regutil.List(m), nil
}

func (d *Discovery) decode(p string, data []byte, service string) (registry.Instance, bool) {
	in, err := regutil.Decode(data, service)
	if err != nil {
		d.log.Warn("skipping bad record", "path", p, "err", err)
		return registry.Instance{}, false
	}
	return in, true
}

// Watch delivers the full, sorted list of service's instances: first the
// current one, then after every change, and again after the session is
// re-established. While ZooKeeper cannot be reached nothing is delivered.
// It fails for an invalid service name and with registry.ErrClosed after
// Close.
func (d *Discovery) Watch(ctx context.Context, service string) (<-chan []registry.Instance, error) {
	return d.life.Watch(ctx, service, func(ctx context.Context, feed *regutil.Feed) {
		w := &watcher{d: d, service: service, dir: d.cfg.servicePath(service), feed: feed,
			events: make(chan watchEvent), nodes: make(map[string]*child)}
		w.run(ctx)
	})
}

// watcher is the state of one Watch.
type watcher struct {
	d       *Discovery
	service string
	dir     string
	feed    *regutil.Feed

	events chan watchEvent
	wg     sync.WaitGroup // forwarding goroutines
	epoch  uint64         // bumped when the session's watches are lost
	gen    uint64         // last child watch generation

	dirWatched bool // a children (or exists) watch is set on dir
	nodes      map[string]*child
}

// child is one child znode of the service znode.
type child struct {
	in      registry.Instance
	ok      bool   // in decoded
	watched bool   // a data watch is set
	gen     uint64 // generation of that watch
}

// watchEvent is a fired zk watch: of dir when node is "", else of the
// child node.
type watchEvent struct {
	ev    zk.Event
	epoch uint64
	node  string
	gen   uint64
}

// forward hands ch's one event to w.events.
func (w *watcher) forward(ctx context.Context, ch <-chan zk.Event, node string, gen uint64) {
	epoch := w.epoch
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		select {
		case ev, ok := <-ch:
			if !ok {
				ev = zk.Event{Type: zk.EventNotWatching, Err: zk.ErrClosing}
			}
			select {
			case w.events <- watchEvent{ev: ev, epoch: epoch, node: node, gen: gen}:
			case <-ctx.Done():
			}
		case <-ctx.Done():
		}
	}()
}

func (w *watcher) run(ctx context.Context) {
	defer w.wg.Wait()
	var (
		bo          regutil.Backoff
		force       = true
		reconnected = w.d.reconnected.C()
	)
	for {
		var retry <-chan time.Time
		if err := w.sync(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			w.d.log.Debug("watch: read failed; retrying", "service", w.service, "err", err)
			retry = time.After(bo.Next())
		} else {
			bo.Reset()
			list := w.list()
			w.d.cache.Put(w.service, list)
			w.feed.Publish(list, force)
			force = false
		}
		select {
		case <-ctx.Done():
			return
		case <-reconnected:
			reconnected = w.d.reconnected.C()
			force = true
		case ev := <-w.events:
			if w.handle(ev) {
				force = true
			}
		case <-retry:
		}
	}
}

// sync sets the watches that are missing and reads what they cover.
func (w *watcher) sync(ctx context.Context) error {
	conn := w.d.conn
	for !w.dirWatched {
		children, _, ch, err := conn.ChildrenW(w.dir)
		if errors.Is(err, zk.ErrNoNode) {
			exists, _, ech, err := conn.ExistsW(w.dir)
			if err != nil {
				return err
			}
			if exists { // created in between: list its children
				continue
			}
			w.forward(ctx, ech, "", 0)
			w.dirWatched = true
			clear(w.nodes)
			break
		}
		if err != nil {
			return err
		}
		w.forward(ctx, ch, "", 0)
		w.dirWatched = true
		present := make(map[string]bool, len(children))
		for _, name := range children {
			present[name] = true
			if w.nodes[name] == nil {
				w.nodes[name] = &child{}
			}
		}
		for name := range w.nodes {
			if !present[name] {
				delete(w.nodes, name)
			}
		}
	}
	for name, c := range w.nodes {
		if c.watched {
			continue
		}
		p := w.dir + "/" + name
		data, _, ch, err := conn.GetW(p)
		if errors.Is(err, zk.ErrNoNode) {
			delete(w.nodes, name) // the children watch reports it too
			continue
		}
		if err != nil {
			return err
		}
		w.gen++
		c.watched, c.gen = true, w.gen
		w.forward(ctx, ch, name, c.gen)
		c.in, c.ok = w.d.decode(p, data, w.service)
	}
	return nil
}

// handle applies a fired watch; it reports whether all watches were lost
// (the list must then be delivered even if unchanged).
func (w *watcher) handle(ev watchEvent) bool {
	if ev.epoch != w.epoch {
		return false // a watch from before the watches were lost
	}
	if ev.ev.Type == zk.EventNotWatching {
		// The session expired or the client closed: every watch is gone.
		w.epoch++
		w.dirWatched = false
		for _, c := range w.nodes {
			c.watched = false
		}
		return true
	}
	if ev.node == "" {
		w.dirWatched = false
		return false
	}
	if c := w.nodes[ev.node]; c != nil && c.gen == ev.gen {
		c.watched = false
		if ev.ev.Type == zk.EventNodeDeleted {
			delete(w.nodes, ev.node)
		}
	}
	return false
}

func (w *watcher) list() []registry.Instance {
	list := make([]registry.Instance, 0, len(w.nodes))
	for _, c := range w.nodes {
		if c.ok {
			list = append(list, c.in)
		}
	}
	registry.Sort(list)
	return regutil.Clone(list)
}

// Close ends every watch and closes the session. Calling Close again
// does nothing.
func (d *Discovery) Close() error {
	if !d.life.Close() {
		return nil
	}
	d.conn.Close()
	return nil
}

// Services returns the names of the services under Root with at least one
// instance record that decodes, sorted. It fails when ZooKeeper cannot be
// reached, when ctx is done, and with registry.ErrClosed after Close.
func (d *Discovery) Services(ctx context.Context) ([]string, error) {
	if d.life.Closed() {
		return nil, fmt.Errorf("zookeeper: services: %w", registry.ErrClosed)
	}
	children, _, err := d.conn.Children(d.cfg.Root)
	if errors.Is(err, zk.ErrNoNode) {
		return []string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("zookeeper: services: %w", err)
	}
	set := make(map[string]struct{})
	for _, service := range children {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		list, err := d.read(service)
		if err != nil {
			return nil, fmt.Errorf("zookeeper: services: %w", err)
		}
		if len(list) > 0 {
			set[service] = struct{}{}
		}
	}
	return regutil.Names(set), nil
}

var _ registry.ServiceLister = (*Discovery)(nil)
