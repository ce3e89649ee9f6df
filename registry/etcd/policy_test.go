package etcd_test

import (
	"context"
	"testing"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/policy"
	"github.com/fleetrpc/fleet/policy/policytest"
	"github.com/fleetrpc/fleet/registry/etcd"
)

var _ policy.Store = (*etcd.PolicyStore)(nil)

// TestPolicyStore runs the policy scenarios with the policy held in a real
// (in-process) etcd: canary split, header route, live timeout and retry,
// fault share, bad documents refused, an etcd outage survived.
func TestPolicyStore(t *testing.T) {
	s := startEtcd(t)
	store, err := etcd.NewPolicyStore(config(s, 0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	ctx := context.Background()
	if _, err := store.Get(ctx, "Echo"); fleet.CodeOf(err) != fleet.NotFound {
		t.Fatalf("Get of a missing document: %v", err)
	}
	for _, sc := range []struct {
		name string
		run  func(*testing.T, *policytest.Fixture)
	}{
		{"Canary", policytest.Canary},
		{"HeaderRoute", policytest.HeaderRoute},
		{"LiveTimeoutAndRetry", policytest.LiveTimeoutAndRetry},
		{"Fault", policytest.Fault},
		{"BadPolicyKept", policytest.BadPolicyKept},
		{"Breaker", policytest.Breaker},
		{"Outage", func(t *testing.T, f *policytest.Fixture) { policytest.Outage(t, f, s.stop, s.start) }},
	} {
		t.Run(sc.name, func(t *testing.T) { sc.run(t, policytest.NewFixture(t, store)) })
	}
	doc, err := store.Get(ctx, "Echo")
	if err != nil {
		t.Fatal(err)
	}
	if p, err := policy.Parse(doc); err != nil || p.Version() != "after-outage" {
		t.Fatalf("Get returned %s (%v)", doc, err)
	}
	if err := store.Put(ctx, "Echo", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Get(ctx, "Echo"); fleet.CodeOf(err) != fleet.NotFound {
		t.Fatalf("Get after delete: %v", err)
	}
}
