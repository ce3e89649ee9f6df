package redis_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/policy"
	"github.com/fleetrpc/fleet/policy/policytest"
	"github.com/fleetrpc/fleet/registry/internal/tcpproxy"
	"github.com/fleetrpc/fleet/registry/redis"
)

var _ policy.Store = (*redis.PolicyStore)(nil)

// TestPolicyStore runs the policy scenarios with the policy held in the
// real Redis, reached through a proxy that the outage scenario cuts.
func TestPolicyStore(t *testing.T) {
	rawClient(t)
	proxy, err := tcpproxy.Start(redisAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	cfg := config(proxy.Addr(), time.Second)
	cfg.PolicyPrefix = fmt.Sprintf("fleet:test:policies:%d", time.Now().UnixNano())
	cfg.PollInterval = 200 * time.Millisecond
	store, err := redis.NewPolicyStore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		store.Put(context.Background(), "Echo", nil)
		store.Close()
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
