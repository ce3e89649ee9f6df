package registrytest

import (
	"context"
	"testing"

	"github.com/fleetrpc/fleet/registry"
)

// Switch cuts the clients that reach a registry through it off from the
// registry and lets them through again, as registry/internal/tcpproxy's
// Proxy does.
type Switch interface {
	// Block cuts every connection and refuses new ones.
	Block()
	// Unblock lets connections through again.
	Unblock()
}

// DiscoveryOutage checks that a Discovery cut off from the registry keeps
// its watchers' last list and answers Instances from it, and that once
// it can reach the registry again it delivers the current list, including
// what changed meanwhile, and keeps watching. d must reach the registry
// through sw and r directly; the caller closes both. While d is cut off
// its watch must deliver nothing for opts.Settle; opts.Timeout bounds the
// other waits (twice that for the reconnection). It fails t otherwise.
func DiscoveryOutage(t *testing.T, r registry.Registrar, d registry.Discovery, sw Switch, opts Options) {
	t.Helper()
	opts.defaults()
	ctx, cancel := context.WithTimeout(t.Context(), 4*opts.Timeout+opts.Settle)
	defer cancel()
	svc := ServiceName(t)
	a := registry.Instance{Service: svc, Addr: Addr(1)}
	b := registry.Instance{Service: svc, Addr: Addr(2)}
	if err := r.Register(ctx, a); err != nil {
		t.Fatal(err)
	}
	ch, err := d.Watch(ctx, svc)
	if err != nil {
		t.Fatal(err)
	}
	WaitFor(t, svc, ch, opts.Timeout, HasKeys(a.Key()))

	sw.Block()
	if err := r.Register(ctx, b); err != nil {
		t.Fatal(err)
	}
	// Nothing is delivered while cut off: no empty list, no close.
	Quiet(t, svc, ch, opts.Settle, func([]registry.Instance) bool { return true })
	qctx, qcancel := context.WithTimeout(ctx, opts.Timeout)
	list, err := d.Instances(qctx, svc)
	qcancel()
	if err != nil || len(list) != 1 || list[0].Key() != a.Key() {
		t.Fatalf("Instances while cut off = %v, %v; want the last list", Keys(list), err)
	}

	sw.Unblock()
	WaitFor(t, svc, ch, 2*opts.Timeout, HasKeys(a.Key(), b.Key()))
	if err := r.Deregister(ctx, a); err != nil {
		t.Fatal(err)
	}
	WaitFor(t, svc, ch, opts.Timeout, HasKeys(b.Key()))
}

// RegistrarOutage checks that a Registrar cut off from the registry for
// longer than its records live loses them, and that once it can reach the
// registry again it restores them by itself. r must reach the registry
// through sw and d directly; the caller closes both. opts.ExpiryTimeout
// bounds the wait for the loss and for the restoration, opts.Timeout the
// first list. It fails t otherwise.
func RegistrarOutage(t *testing.T, r registry.Registrar, d registry.Discovery, sw Switch, opts Options) {
	t.Helper()
	opts.defaults()
	ctx, cancel := context.WithTimeout(t.Context(), opts.Timeout+2*opts.ExpiryTimeout)
	defer cancel()
	svc := ServiceName(t)
	a := registry.Instance{Service: svc, Addr: Addr(1)}
	if err := r.Register(ctx, a); err != nil {
		t.Fatal(err)
	}
	ch, err := d.Watch(ctx, svc)
	if err != nil {
		t.Fatal(err)
	}
	WaitFor(t, svc, ch, opts.Timeout, HasKeys(a.Key()))
	sw.Block()
	WaitFor(t, svc, ch, opts.ExpiryTimeout, HasKeys())
	sw.Unblock()
	WaitFor(t, svc, ch, opts.ExpiryTimeout, HasKeys(a.Key()))
}
