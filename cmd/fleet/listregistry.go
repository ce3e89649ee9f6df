package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strings"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/server/reflection"
)

// registryServices is one service of a registry listing and its
// instances, as `fleet list --json scheme://host:port` prints it.
type registryServices struct {
	Service   string              `json:"service"`
	Instances []registry.Instance `json:"instances"`
}

// isRegistryRoot reports whether raw is a registry URL without a service
// path ("etcd://host:port", "static://a:1,b:2"), the form under which
// fleet list shows the registry's services.
func isRegistryRoot(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && strings.Contains(raw, "://") && u.Host != "" && strings.Trim(u.Path, "/") == "" &&
		u.Scheme != "http" && u.Scheme != "https"
}

// listRegistry lists the services a registry holds and their instances:
// through the Discovery's registry.ServiceLister for etcd, ZooKeeper,
// Redis and NATS; for a static list, by asking each server's reflection
// service what it serves.
func listRegistry(ctx context.Context, raw string, f *listFlags) ([]registryServices, error) {
	u, _ := url.Parse(raw)
	if u.Scheme == "static" {
		return listStatic(ctx, u.Host, f)
	}
	open, ok := registrySchemes[u.Scheme]
	if !ok {
		return nil, usagef("target %q: unknown scheme %q (want static, %s)", raw, u.Scheme, strings.Join(registrySchemeNames(), ", "))
	}
	b, err := open(u.Scheme+"://"+u.Host, u.Host)
	if err != nil {
		return nil, &callError{"registry " + u.Host, fleet.WrapError(fleet.Unavailable, err)}
	}
	defer b.close()
	lister, ok := b.discovery.(registry.ServiceLister)
	if !ok {
		return nil, &callError{"registry " + u.Host, fleet.Errorf(fleet.Unimplemented, "the %s registry cannot list its services", u.Scheme)}
	}
	names, err := lister.Services(ctx)
	if err != nil {
		return nil, &callError{"registry " + u.Host, registryError(ctx, err)}
	}
	out := make([]registryServices, 0, len(names))
	for _, name := range names {
		list, err := b.discovery.Instances(ctx, name)
		if err != nil {
			return nil, &callError{"registry " + u.Host, registryError(ctx, err)}
		}
		if len(list) > 0 { // deregistered since Services
			out = append(out, registryServices{Service: name, Instances: list})
		}
	}
	return out, nil
}

// registryError gives a registry failure its code: deadline_exceeded when
// the command's deadline ended it, else unavailable.
func registryError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fleet.FromContextError(ctx.Err())
	}
	return fleet.WrapError(fleet.Unavailable, err)
}

// listStatic asks each server of a static list ("host1:port1,host2:port2")
// for its services.
func listStatic(ctx context.Context, hosts string, f *listFlags) ([]registryServices, error) {
	byService := map[string][]registry.Instance{}
	for _, addr := range strings.Split(hosts, ",") {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, usagef("static list %q: %q is not host:port", hosts, addr)
		}
		t, err := openTarget(addr, &f.connFlags)
		if err != nil {
			return nil, err
		}
		var list reflection.ListReply
		err = t.reflect(ctx, "List", &reflection.ListRequest{}, &list)
		t.close()
		if err != nil {
			return nil, err
		}
		for _, s := range list.Services {
			byService[s.Name] = append(byService[s.Name], registry.Instance{Service: s.Name, Addr: addr})
		}
	}
	out := make([]registryServices, 0, len(byService))
	for name, list := range byService {
		registry.Sort(list)
		out = append(out, registryServices{Service: name, Instances: list})
	}
	slices.SortFunc(out, func(a, b registryServices) int { return strings.Compare(a.Service, b.Service) })
	return out, nil
}

// printRegistry prints a registry listing: each service on a line, then
// its instances indented, with weight and state.
func printRegistry(w io.Writer, list []registryServices) {
	for _, s := range list {
		fmt.Fprintln(w, s.Service)
		for _, in := range s.Instances {
			state := in.State
			if state == "" {
				state = registry.Active
			}
			fmt.Fprintf(w, "  %-24s weight %d  %s\n", in.Key(), in.EffectiveWeight(), state)
		}
	}
}
