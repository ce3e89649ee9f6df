package main

import (
	"fmt"
	"net/url"
	"time"

	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/registry/etcd"
	"github.com/fleetrpc/fleet/registry/etcd/embedded"
	"github.com/fleetrpc/fleet/registry/nats"
	"github.com/fleetrpc/fleet/registry/redis"
	"github.com/fleetrpc/fleet/registry/zookeeper"
)

// registryBackend makes registrars (one per server, as separate server
// processes would have) and one discovery for the client.
type registryBackend struct {
	name         string // for people: the URL, or "embedded etcd at host:port"
	url          string // the registry URL clients use: etcd://host:port for the embedded one
	newRegistrar func() (registry.Registrar, error)
	discovery    registry.Discovery
	close        func()
}

// openRegistry connects to the registry at rawURL, or starts an
// in-process etcd when rawURL is empty, listening on embedAddr (a free
// loopback port when embedAddr is "" or its port 0).
func openRegistry(rawURL, embedAddr string) (*registryBackend, error) {
	if rawURL == "" {
		srv, err := embedded.NewAt("", embedAddr)
		if err != nil && embedAddr != "" {
			return nil, fmt.Errorf("embedded etcd on --registry-addr %s (give another address, or --registry URL for an external registry): %w", embedAddr, err)
		}
		if err != nil {
			return nil, err
		}
		b, err := etcdBackend("embedded etcd at "+srv.Addr(), srv.Addr())
		if err != nil {
			srv.Close()
			return nil, err
		}
		b.url = "etcd://" + srv.Addr()
		inner := b.close
		b.close = func() { inner(); srv.Close() }
		return b, nil
	}
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("--registry %q: want scheme://host:port", rawURL)
	}
	if open, ok := registrySchemes[u.Scheme]; ok {
		b, err := open(rawURL, u.Host)
		if err == nil {
			b.url = rawURL
		}
		return b, err
	}
	return nil, fmt.Errorf("--registry %q: unknown scheme %q", rawURL, u.Scheme)
}

// registrySchemes maps a --registry URL scheme to its backend.
var registrySchemes = map[string]func(name, hostport string) (*registryBackend, error){
	"etcd": etcdBackend,
	"zookeeper": func(name, hostport string) (*registryBackend, error) {
		cfg := zookeeper.Config{Servers: []string{hostport}, Logger: quietLogger()}
		return backend(name, func() (registry.Registrar, error) { return zookeeper.NewRegistrar(cfg) },
			func() (registry.Discovery, error) { return zookeeper.NewDiscovery(cfg) })
	},
	"redis": func(name, hostport string) (*registryBackend, error) {
		cfg := redis.Config{Addr: hostport, TTL: demoTTL, Logger: quietLogger()}
		return backend(name, func() (registry.Registrar, error) { return redis.NewRegistrar(cfg) },
			func() (registry.Discovery, error) { return redis.NewDiscovery(cfg) })
	},
	"nats": func(name, hostport string) (*registryBackend, error) {
		cfg := nats.Config{URL: "nats://" + hostport, TTL: demoTTL, Logger: quietLogger()}
		return backend(name, func() (registry.Registrar, error) { return nats.NewRegistrar(cfg) },
			func() (registry.Discovery, error) { return nats.NewDiscovery(cfg) })
	},
}

// backend pairs a registrar factory with one discovery.
func backend(name string, newReg func() (registry.Registrar, error), newDisc func() (registry.Discovery, error)) (*registryBackend, error) {
	d, err := newDisc()
	if err != nil {
		return nil, err
	}
	return &registryBackend{name: name, newRegistrar: newReg, discovery: d, close: func() { d.Close() }}, nil
}

const demoTTL = 10 * time.Second

func etcdBackend(name, hostport string) (*registryBackend, error) {
	cfg := etcd.Config{Endpoints: []string{hostport}, TTL: demoTTL, Logger: quietLogger()}
	return backend(name, func() (registry.Registrar, error) { return etcd.NewRegistrar(cfg) },
		func() (registry.Discovery, error) { return etcd.NewDiscovery(cfg) })
}
