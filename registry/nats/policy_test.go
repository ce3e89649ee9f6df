package nats_test

import (
	"context"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/policy"
	"github.com/fleetrpc/fleet/policy/policytest"
	"github.com/fleetrpc/fleet/registry/internal/tcpproxy"
	fnats "github.com/fleetrpc/fleet/registry/nats"
)

var _ policy.Store = (*fnats.PolicyStore)(nil)

// TestPolicyStore runs the policy scenarios with the policy held in the
// real NATS key-value store, reached through a proxy that the outage
// scenario cuts.
func TestPolicyStore(t *testing.T) {
	proxy, err := tcpproxy.Start(natsAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	cfg := config(proxy.Addr(), testBucket(t), time.Second)
	cfg.PolicyBucket = testBucket(t)
	store, err := fnats.NewPolicyStore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	if _, err := store.Get(context.Background(), "Echo"); fleet.CodeOf(err) != fleet.NotFound {
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
		{"Outage", func(t *testing.T, f *policytest.Fixture) { policytest.Outage(t, f, proxy.Block, proxy.Unblock) }},
	} {
		t.Run(sc.name, func(t *testing.T) { sc.run(t, policytest.NewFixture(t, store)) })
	}
}
