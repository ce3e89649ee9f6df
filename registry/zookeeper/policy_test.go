package zookeeper_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/policy"
	"github.com/fleetrpc/fleet/policy/policytest"
	"github.com/fleetrpc/fleet/registry/internal/tcpproxy"
	"github.com/fleetrpc/fleet/registry/zookeeper"
)

var _ policy.Store = (*zookeeper.PolicyStore)(nil)

// TestPolicyStore runs the policy scenarios with the policy held in the
// real ZooKeeper, reached through a proxy that the outage scenario cuts.
func TestPolicyStore(t *testing.T) {
	raw := rawConn(t)
	proxy, err := tcpproxy.Start(zkAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	cfg := config(proxy.Addr(), 4*time.Second)
	cfg.PolicyRoot = fmt.Sprintf("/fleet-test/policies-%d", time.Now().UnixNano())
	store, err := zookeeper.NewPolicyStore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		store.Put(context.Background(), "Echo", nil)
		store.Close()
		raw.Delete(cfg.PolicyRoot, -1)
	})
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
