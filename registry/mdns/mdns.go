package mdns

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/mdns"

	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/registry/internal/regutil"
)

// Config configures a Registrar or a Discovery. The zero value uses the
// system's default multicast interface, IPv4 only, in domain "local.",
// with the defaults below.
type Config struct {
	// Domain is the DNS-SD domain, a fully qualified name. Default
	// "local.".
	Domain string
	// Interface is the network interface to advertise and query on.
	// Default: the system's default multicast interface.
	Interface *net.Interface
	// IPv6 makes queries use IPv6 multicast (ff02::fb) too.
	IPv6 bool
	// QueryTimeout is how long one query collects answers. Default 1s.
	QueryTimeout time.Duration
	// Interval is how often a Watch queries. Default 5s.
	Interval time.Duration
	// Expiry is how long a watched instance may go without answering
	// before Watch drops it. Default 2×Interval + QueryTimeout (two
	// missed queries).
	Expiry time.Duration
	// Logger receives the backend's logs and, at Debug, hashicorp/mdns's.
	// Default slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Domain == "" {
		c.Domain = "local."
	}
	if !strings.HasSuffix(c.Domain, ".") {
		c.Domain += "."
	}
	if c.QueryTimeout <= 0 {
		c.QueryTimeout = time.Second
	}
	if c.Interval <= 0 {
		c.Interval = 5 * time.Second
	}
	if c.Expiry <= 0 {
		c.Expiry = 2*c.Interval + c.QueryTimeout
	}
	c.Logger = regutil.Logger(c.Logger, "mdns")
	return c
}

// libLogger is a *log.Logger for hashicorp/mdns that writes to the slog
// logger at Debug: it reports every malformed packet on the network.
func (c Config) libLogger() *log.Logger {
	return slog.NewLogLogger(c.Logger.Handler(), slog.LevelDebug)
}

// ServiceName returns the DNS-SD service type a service is advertised
// as: "_fleet-<service>._tcp", with every character other than letters,
// digits and '-' replaced by '-', shortened (with a hash) to fit a DNS
// label.
func ServiceName(service string) string {
	return "_" + label("fleet-"+service) + "._tcp"
}

// label makes s a DNS label of letters, digits and '-', at most 63 bytes.
func label(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			b[i] = '-'
		}
	}
	out := string(b)
	if len(out) > 62 { // 62: ServiceName adds '_'
		sum := sha256.Sum256([]byte(s))
		out = out[:49] + "-" + hex.EncodeToString(sum[:6])
	}
	return out
}

var (
	_ registry.Registrar = (*Registrar)(nil)
	_ registry.Discovery = (*Discovery)(nil)
)

// Registrar advertises instances with one mDNS responder each. It is
// safe for concurrent use.
type Registrar struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	closed  bool
	servers map[[2]string]*mdns.Server // service, Key
}

// NewRegistrar returns a Registrar using cfg.
func NewRegistrar(cfg Config) (*Registrar, error) {
	cfg = cfg.withDefaults()
	return &Registrar{cfg: cfg, log: cfg.Logger, servers: make(map[[2]string]*mdns.Server)}, nil
}

// zone builds the DNS-SD records of in.
func (r *Registrar) zone(in registry.Instance) (*mdns.MDNSService, error) {
	switch in.Network {
	case "", "tcp", "tls":
	default:
		return nil, fmt.Errorf("mdns: cannot advertise a %q address; only host:port", in.Network)
	}
	host, portStr, err := net.SplitHostPort(in.Addr)
	if err != nil {
		return nil, fmt.Errorf("mdns: address %q: %w", in.Addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port <= 0 || port > 65535 {
		return nil, fmt.Errorf("mdns: address %q: bad port", in.Addr)
	}
	ips, err := r.ips(host)
	if err != nil {
		return nil, fmt.Errorf("mdns: address %q: %w", in.Addr, err)
	}
	txt, err := EncodeTXT(in)
	if err != nil {
		return nil, err
	}
	txt = escapeTXT(txt)
	name := label(in.Key())
	// A host name of its own per instance: hashicorp/mdns's client mixes
	// up instances that share a host name.
	hostName := name + "." + r.cfg.Domain
	z, err := mdns.NewMDNSService(name, ServiceName(in.Service), r.cfg.Domain, hostName, port, ips, txt)
	if err != nil {
		return nil, fmt.Errorf("mdns: %w", err)
	}
	return z, nil
}

// ips returns the addresses to advertise for host.
func (r *Registrar) ips(host string) ([]net.IP, error) {
	if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
		return []net.IP{ip}, nil
	}
	if host != "" && net.ParseIP(host) == nil {
		ips, err := net.LookupIP(host)
		if err != nil {
			return nil, err
		}
		return ips, nil
	}
	var addrs []net.Addr
	if r.cfg.Interface != nil {
		a, err := r.cfg.Interface.Addrs()
		if err != nil {
			return nil, err
		}
		addrs = a
	} else {
		ifs, err := net.Interfaces()
		if err != nil {
			return nil, err
		}
		for _, ifi := range ifs {
			if ifi.Flags&net.FlagUp == 0 || ifi.Flags&net.FlagLoopback != 0 {
				continue
			}
			a, err := ifi.Addrs()
			if err == nil {
				addrs = append(addrs, a...)
			}
		}
	}
	var ips []net.IP
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLinkLocalUnicast() {
			ips = append(ips, n.IP)
		}
	}
	if len(ips) == 0 {
		return nil, errors.New("no interface address to advertise")
	}
	return ips, nil
}

// Register starts answering queries for in, replacing the responder of a
// previous registration of the same service and Key. It fails for an
// invalid instance or one that is not "host:port", when a TXT string
// would exceed 255 bytes, when no multicast socket can be opened, and
// with registry.ErrClosed after Close.
func (r *Registrar) Register(ctx context.Context, in registry.Instance) error {
	return r.advertise(ctx, in, false)
}

// Update restarts in's responder with its new TXT strings. It fails with
// registry.ErrNotRegistered for an instance r has not registered.
func (r *Registrar) Update(ctx context.Context, in registry.Instance) error {
	return r.advertise(ctx, in, true)
}

func (r *Registrar) advertise(ctx context.Context, in registry.Instance, update bool) error {
	if err := in.Validate(); err != nil {
		return fmt.Errorf("mdns: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	z, err := r.zone(in)
	if err != nil {
		return err
	}
	k := [2]string{in.Service, in.Key()}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return fmt.Errorf("mdns: advertise %s: %w", in.Key(), registry.ErrClosed)
	}
	old := r.servers[k]
	if update && old == nil {
		return fmt.Errorf("mdns: update %s of %q: %w", in.Key(), in.Service, registry.ErrNotRegistered)
	}
	if old != nil {
		old.Shutdown()
		delete(r.servers, k)
	}
	srv, err := mdns.NewServer(&mdns.Config{Zone: z, Iface: r.cfg.Interface, Logger: r.cfg.libLogger()})
	if err != nil {
		return fmt.Errorf("mdns: advertise %s: %w", in.Key(), err)
	}
	r.servers[k] = srv
	return nil
}

// Deregister stops answering for in; other hosts drop it after their
// Expiry. An instance r does not advertise is not an error.
func (r *Registrar) Deregister(ctx context.Context, in registry.Instance) error {
	if err := in.Validate(); err != nil {
		return fmt.Errorf("mdns: %w", err)
	}
	k := [2]string{in.Service, in.Key()}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return fmt.Errorf("mdns: deregister %s: %w", in.Key(), registry.ErrClosed)
	}
	if srv := r.servers[k]; srv != nil {
		srv.Shutdown()
		delete(r.servers, k)
	}
	return nil
}

// Close stops every responder. Calling Close again does nothing.
func (r *Registrar) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	for k, srv := range r.servers {
		srv.Shutdown()
		delete(r.servers, k)
	}
	return nil
}

// Discovery finds instances by multicast queries. It is safe for
// concurrent use.
type Discovery struct {
	cfg  Config
	log  *slog.Logger
	life *regutil.Life
}

// NewDiscovery returns a Discovery using cfg.
func NewDiscovery(cfg Config) (*Discovery, error) {
	cfg = cfg.withDefaults()
	return &Discovery{cfg: cfg, log: cfg.Logger, life: regutil.NewLife()}, nil
}

// query sends one query for service and returns the instances that
// answered within QueryTimeout, keyed by Key.
func (d *Discovery) query(ctx context.Context, service string) (map[string]registry.Instance, error) {
	entries := make(chan *mdns.ServiceEntry, 64)
	found := make(map[string]registry.Instance)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range entries {
			in, err := DecodeTXT(unescapeTXT(e.InfoFields))
			if err != nil {
				d.log.Debug("ignoring an answer", "name", e.Name, "err", err)
				continue
			}
			if in.Service != service {
				continue // another service with the same DNS-SD name
			}
			in.Addr = fillHost(in.Addr, e)
			found[in.Key()] = in
		}
	}()
	err := mdns.QueryContext(ctx, &mdns.QueryParam{
		Service:     ServiceName(service),
		Domain:      d.cfg.Domain,
		Timeout:     d.cfg.QueryTimeout,
		Interface:   d.cfg.Interface,
		Entries:     entries,
		DisableIPv6: !d.cfg.IPv6,
		Logger:      d.cfg.libLogger(),
	})
	close(entries)
	<-done
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return nil, err
	}
	return found, nil
}

// fillHost replaces an empty or unspecified host in addr with the
// address the answer carried.
func fillHost(addr string, e *mdns.ServiceEntry) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		return addr
	}
	switch {
	case e.AddrV4 != nil:
		return net.JoinHostPort(e.AddrV4.String(), port)
	case e.AddrV6IPAddr != nil:
		return net.JoinHostPort(e.AddrV6IPAddr.String(), port)
	}
	return addr
}

// Instances queries once and returns the instances of service that
// answered within QueryTimeout, sorted by Key. It fails for an invalid
// service name, when no multicast socket can be opened, and with
// registry.ErrClosed after Close.
func (d *Discovery) Instances(ctx context.Context, service string) ([]registry.Instance, error) {
	if err := regutil.ValidateService(service); err != nil {
		return nil, err
	}
	if d.life.Closed() {
		return nil, fmt.Errorf("mdns: instances of %q: %w", service, registry.ErrClosed)
	}
	found, err := d.query(ctx, service)
	if err != nil {
		return nil, fmt.Errorf("mdns: instances of %q: %w", service, err)
	}
	return regutil.List(found), nil
}

// Watch queries every Interval and delivers the full, sorted list of
// service's instances: first after the first query, then whenever an
// instance appears, changes, or has not answered for Expiry. It fails for
// an invalid service name and with registry.ErrClosed after Close.
func (d *Discovery) Watch(ctx context.Context, service string) (<-chan []registry.Instance, error) {
	return d.life.Watch(ctx, service, func(ctx context.Context, feed *regutil.Feed) {
		d.watch(ctx, service, feed)
	})
}

func (d *Discovery) watch(ctx context.Context, service string, feed *regutil.Feed) {
	type seen struct {
		in   registry.Instance
		last time.Time
	}
	known := make(map[string]seen)
	first := true
	ticker := time.NewTicker(d.cfg.Interval)
	defer ticker.Stop()
	for {
		found, err := d.query(ctx, service)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			d.log.Warn("watch: query failed", "service", service, "err", err)
		} else {
			now := time.Now()
			for k, in := range found {
				known[k] = seen{in: in, last: now}
			}
			list := make(map[string]registry.Instance, len(known))
			for k, s := range known {
				if now.Sub(s.last) > d.cfg.Expiry {
					delete(known, k)
					continue
				}
				list[k] = s.in
			}
			feed.Publish(regutil.List(list), first)
			first = false
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// Close ends every watch. Calling Close again does nothing.
func (d *Discovery) Close() error {
	d.life.Close()
	return nil
}

// escapeTXT writes TXT strings in the presentation format that
// github.com/miekg/dns (under hashicorp/mdns) packs: a backslash starts an
// escape there, so each one is doubled. Other bytes pack as they are.
func escapeTXT(txt []string) []string {
	out := make([]string, len(txt))
	for i, s := range txt {
		out[i] = strings.ReplaceAll(s, `\`, `\\`)
	}
	return out
}

// unescapeTXT turns TXT strings as miekg/dns unpacks them (presentation
// format: '"' and '\' escaped with a backslash, unprintable bytes as
// \DDD) back into their bytes.
func unescapeTXT(txt []string) []string {
	out := make([]string, len(txt))
	for i, s := range txt {
		if !strings.Contains(s, `\`) {
			out[i] = s
			continue
		}
		var b strings.Builder
		for j := 0; j < len(s); j++ {
			c := s[j]
			if c != '\\' || j+1 == len(s) {
				b.WriteByte(c)
				continue
			}
			j++
			if j+2 < len(s) && isDigit(s[j]) && isDigit(s[j+1]) && isDigit(s[j+2]) {
				if v := int(s[j]-'0')*100 + int(s[j+1]-'0')*10 + int(s[j+2]-'0'); v <= 255 {
					b.WriteByte(byte(v))
					j += 2
					continue
				}
			}
			b.WriteByte(s[j])
		}
		out[i] = b.String()
	}
	return out
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
