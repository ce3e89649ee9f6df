// Package policy is Fleet's traffic policy as data: per service, ordered
// routes that match calls (method, request metadata, a percentage) and
// send them to weighted subsets of the instances with a timeout, a retry
// policy, hedging, injected faults and circuit-breaker thresholds; and
// per-method server limits. A Document is read from JSON or YAML (Parse),
// checked before anything applies it (Compile), and followed live from a
// Source (a registry key, a file) by a Watcher, which keeps the last good
// policy when a document is bad or the source is unreachable.
//
// The semantics follow xDS's RouteConfiguration, so a control plane's
// routes map onto a Document: routes are virtual-host routes in order,
// Destinations are weighted clusters over endpoint subsets, Retry is
// Envoy's retry policy with a mandatory budget, Hedge is gRPC's hedging
// policy, Fault is Envoy's HTTP fault filter (applied per attempt, so a
// caller's retries can absorb an injected abort).
//
// Apply a policy to an XClient with client.WithPolicy(NewClient(w)), and
// to a server's per-method limits with ApplyLimits(w, ServerLimits(srv),
// nil), which sets each document's limits in one step. The registry
// backends provide Stores: etcd.NewPolicyStore in module
// github.com/fleetrpc/fleet/registry/etcd, and so on; File and Memory are
// here; an xDS management server's routes come through xds.New in module
// github.com/fleetrpc/fleet/policy/xds. A Watcher reports what it has in
// force (Stats, PolicyStatus, its JSON form) without importing Prometheus:
// fleetprom.NewPolicyCollector and fleetprom.AdminConfig.Policies (module
// github.com/fleetrpc/fleet/observability/prometheus) export it as metrics
// and on the admin endpoint's /policy. The guide is docs/policy.md.
package policy
