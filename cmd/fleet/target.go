package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/registry/static"
	"github.com/fleetrpc/fleet/selector"
	"github.com/fleetrpc/fleet/server/reflection"
)

// connFlags are the flags every command that reaches a server shares.
type connFlags struct {
	headers    []string
	timeout    time.Duration
	token      string
	tokenFile  string
	selector   string
	failMode   string
	tls        bool
	caFile     string
	certFile   string
	keyFile    string
	serverName string
	insecure   bool
}

func (f *connFlags) register(fl *pflag.FlagSet) {
	fl.StringArrayVarP(&f.headers, "header", "H", nil, "request metadata `key:value` (repeatable)")
	fl.DurationVar(&f.timeout, "timeout", 10*time.Second, "deadline of the whole command, sent to the server with the call")
	fl.StringVar(&f.token, "token", "", "auth token, sent as the \"authorization\" metadata (default: $"+tokenEnv+", else the --token-file)")
	fl.StringVar(&f.tokenFile, "token-file", "", "file holding the auth token, used without --token and $"+tokenEnv+" (default: the admin token fleet demo --serve writes to $XDG_CONFIG_HOME/fleet/demo-token, else ~/.config/fleet/demo-token)")
	fl.StringVar(&f.selector, "selector", "p2c", "selector for registry targets: "+strings.Join(selector.Names(), ", "))
	fl.StringVar(&f.failMode, "failmode", "failover", "fail mode for registry targets: failover, failfast, failtry, failbackup")
	fl.BoolVar(&f.tls, "tls", false, "connect with TLS")
	fl.StringVar(&f.caFile, "cacert", "", "PEM file of the CAs that sign the server's certificate (implies --tls; default: the system roots)")
	fl.StringVar(&f.certFile, "cert", "", "PEM client certificate for mutual TLS (implies --tls; needs --key)")
	fl.StringVar(&f.keyFile, "key", "", "PEM private key of --cert")
	fl.StringVar(&f.serverName, "servername", "", "server name to verify in the certificate (default: the host dialled; needed with --tls and a registry TARGET)")
	fl.BoolVar(&f.insecure, "insecure", false, "TLS without verifying the server's certificate (implies --tls; tests only)")
}

// tlsConfig returns the TLS configuration the flags ask for, or nil.
func (f *connFlags) tlsConfig() (*tls.Config, error) {
	if !f.tls && f.caFile == "" && f.certFile == "" && !f.insecure {
		return nil, nil
	}
	cfg := &tls.Config{ServerName: f.serverName, InsecureSkipVerify: f.insecure, MinVersion: tls.VersionTLS12}
	if f.caFile != "" {
		pem, err := os.ReadFile(f.caFile)
		if err != nil {
			return nil, usagef("--cacert: %v", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, usagef("--cacert %s: no PEM certificate in it", f.caFile)
		}
	}
	if f.certFile != "" || f.keyFile != "" {
		cert, err := tls.LoadX509KeyPair(f.certFile, f.keyFile)
		if err != nil {
			return nil, usagef("--cert/--key: %v", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// metadata parses the -H flags.
func (f *connFlags) metadata() (fleet.Metadata, error) {
	if len(f.headers) == 0 {
		return nil, nil
	}
	md := fleet.Metadata{}
	for _, h := range f.headers {
		k, v, ok := strings.Cut(h, ":")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, usagef("-H %q: want key:value", h)
		}
		md[k] = strings.TrimSpace(v)
	}
	return md, nil
}

// target is where a command sends its calls: one server (host:port) or
// the instances of a service in a registry.
type target struct {
	raw     string
	addr    string // direct: host:port
	service string // registry: the service whose instances to use
	disc    registry.Discovery
	close   func()
	opts    []client.Option
	tlsCfg  *tls.Config // from the flags; nil without TLS
	flags   *connFlags
	// fleetPeer is set once a server of the target answered Fleet's
	// Hello: failures are then not explained as a foreign peer.
	fleetPeer bool
}

// openTarget parses TARGET: "host:port", or "scheme://host:port/Service"
// with scheme etcd, zookeeper, redis, nats (a registry server) or static
// ("static://host1:port1,host2:port2/Service", a fixed list).
func openTarget(raw string, f *connFlags) (*target, error) {
	t := &target{raw: raw, close: func() {}, flags: f}
	tlsCfg, err := f.tlsConfig()
	if err != nil {
		return nil, err
	}
	if tlsCfg != nil {
		t.tlsCfg = tlsCfg
		t.opts = append(t.opts, client.WithTLS(tlsCfg))
	}
	if tok := f.authToken(); tok != "" {
		t.opts = append(t.opts, client.WithAuthToken(tok))
	}
	if !strings.Contains(raw, "://") {
		if _, _, err := net.SplitHostPort(raw); err != nil {
			return nil, usagef("target %q: want host:port or scheme://registry/Service (%v)", raw, err)
		}
		t.addr = raw
		return t, nil
	}
	// Flags that only a registry target uses are checked before any
	// network work.
	if _, err := selector.New(f.selector, selector.Config{}); err != nil {
		return nil, usagef("--selector: %v", err)
	}
	if _, err := client.ParseFailMode(f.failMode); err != nil {
		return nil, usagef("--failmode: %v", err)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return nil, usagef("target %q: want scheme://host:port/Service", raw)
	}
	if u.Scheme == "http" || u.Scheme == "https" {
		return nil, usagef("target %q is an HTTP URL: give a Fleet server as host:port (%s), or a registry as etcd://host:port/Service; for the gateway's HTTP/JSON use curl -X POST %s://%s/Service/Method",
			raw, u.Host, u.Scheme, u.Host)
	}
	t.service = strings.Trim(u.Path, "/")
	if t.service == "" {
		return nil, usagef("target %q: no service name after the registry address (e.g. %s://%s/Arith)", raw, u.Scheme, u.Host)
	}
	if u.Scheme == "static" {
		var list []registry.Instance
		for _, a := range strings.Split(u.Host, ",") {
			if _, _, err := net.SplitHostPort(a); err != nil {
				return nil, usagef("target %q: %q is not host:port", raw, a)
			}
			list = append(list, registry.Instance{Service: t.service, Addr: a})
		}
		d, err := static.NewDiscovery(static.Config{Instances: list})
		if err != nil {
			return nil, usagef("target %q: %v", raw, err)
		}
		t.disc, t.close = d, func() { d.Close() }
		return t, nil
	}
	open, ok := registrySchemes[u.Scheme]
	if !ok {
		return nil, usagef("target %q: unknown scheme %q (want static, %s)", raw, u.Scheme, strings.Join(registrySchemeNames(), ", "))
	}
	b, err := open(u.Scheme+"://"+u.Host, u.Host)
	if err != nil {
		return nil, &callError{"registry " + u.Host, fleet.WrapError(fleet.Unavailable, err)}
	}
	t.disc, t.close = b.discovery, b.close
	return t, nil
}

func registrySchemeNames() []string {
	var out []string
	for _, s := range []string{"etcd", "zookeeper", "redis", "nats"} {
		if _, ok := registrySchemes[s]; ok {
			out = append(out, s)
		}
	}
	return out
}

// oneServer returns the network and address of one server of the target:
// the address itself, or the first instance the registry lists.
func (t *target) oneServer(ctx context.Context) (network, addr string, err error) {
	if t.disc == nil {
		return "tcp", t.addr, nil
	}
	list, err := t.disc.Instances(ctx, t.service)
	if err != nil {
		return "", "", &callError{"registry " + t.raw, fleet.WrapError(fleet.Unavailable, err)}
	}
	for _, in := range list {
		if in.State == registry.Draining {
			continue
		}
		network = in.Network
		if network == "" {
			network = "tcp"
		}
		return network, in.Addr, nil
	}
	return "", "", &callError{"registry " + t.raw, fleet.Errorf(fleet.Unavailable, "no instance of service %q is registered", t.service)}
}

// dialOne connects to one server of the target with the connection
// options plus extra.
func (t *target) dialOne(ctx context.Context, extra ...client.Option) (*client.Client, string, error) {
	network, addr, err := t.oneServer(ctx)
	if err != nil {
		return nil, "", err
	}
	opts := append(append([]client.Option{client.WithHeartbeat(0)}, t.opts...), extra...)
	if t.tlsCfg != nil && t.tlsCfg.ServerName == "" && !t.tlsCfg.InsecureSkipVerify {
		// Verify the certificate against the host dialled.
		cfg := t.tlsCfg.Clone()
		cfg.ServerName, _, _ = net.SplitHostPort(addr)
		opts = append(opts, client.WithTLS(cfg))
	}
	c, err := client.Dial(ctx, network, addr, opts...)
	if err != nil {
		return nil, "", t.dialError(ctx, addr, err)
	}
	return c, addr, nil
}

// reflect calls fleet.Reflection.method on one server of the target.
func (t *target) reflect(ctx context.Context, method string, args, reply any) error {
	c, addr, err := t.dialOne(ctx)
	if err != nil {
		return err
	}
	defer t.closeClient(c)
	err = t.callWatched(ctx, c, addr, func(ctx context.Context) error {
		return c.Call(ctx, reflection.Service, method, args, reply)
	})
	if ce, ok := err.(*callError); ok {
		return ce // not a Fleet server
	}
	if err != nil {
		if isNoReflection(err) {
			return &callError{"reflection", fleet.Errorf(fleet.Unimplemented, "the server does not serve %s (see reflection.Register)", reflection.Service)}
		}
		t.noteFleet(c)
		return t.diagnose(addr, &callError{"reflection", err})
	}
	t.fleetPeer = true
	return nil
}

// noteFleet records whether c's server answered Fleet's Hello.
func (t *target) noteFleet(c *client.Client) {
	if c.Capabilities() != 0 {
		t.fleetPeer = true
	}
}

// closeClient closes c after noting whether its server spoke Fleet.
func (t *target) closeClient(c *client.Client) {
	t.noteFleet(c)
	c.Close()
}

// isNoReflection reports whether err says the server has no reflection
// service.
func isNoReflection(err error) bool {
	var fe *fleet.Error
	return errors.As(err, &fe) && fe.Code() == fleet.NotFound && strings.Contains(fe.Message(), fmt.Sprintf("%q", reflection.Service))
}

// invoker makes the call itself: on one connection for a direct target,
// through an XClient for a registry target.
type invoker struct {
	call  func(ctx context.Context, method string, args, reply any) error
	close func()
	where string
}

func (t *target) invoker(ctx context.Context, service string, extra ...client.Option) (*invoker, error) {
	if t.disc == nil {
		c, addr, err := t.dialOne(ctx, extra...)
		if err != nil {
			return nil, err
		}
		return &invoker{
			call: func(ctx context.Context, method string, args, reply any) error {
				err := t.callWatched(ctx, c, addr, func(ctx context.Context) error {
					return c.Call(ctx, service, method, args, reply)
				})
				if err != nil {
					t.noteFleet(c)
				}
				return err
			},
			close: func() { t.closeClient(c) },
			where: addr,
		}, nil
	}
	if service != t.service {
		return nil, usagef("target %q names service %q, but the call is for %q", t.raw, t.service, service)
	}
	sel, err := selector.New(t.flags.selector, selector.Config{})
	if err != nil {
		return nil, usagef("--selector: %v", err)
	}
	mode, err := client.ParseFailMode(t.flags.failMode)
	if err != nil {
		return nil, usagef("--failmode: %v", err)
	}
	copts := append(append([]client.Option{client.WithHeartbeat(0)}, t.opts...), extra...)
	x, err := client.NewXClient(service, t.disc, client.WithSelector(sel), client.WithFailMode(mode), client.WithClientOptions(copts...))
	if err != nil {
		return nil, &callError{"registry " + t.raw, err}
	}
	return &invoker{call: x.Call, close: func() { x.Close() }, where: fmt.Sprintf("%s (%s, %s)", t.raw, t.flags.selector, t.flags.failMode)}, nil
}
