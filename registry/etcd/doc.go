// Package etcd is the registry on etcd v3 (go.etcd.io/etcd/client/v3).
//
// Layout: each instance is one key, Prefix/<service>/<instance Key>
// (Prefix defaults to "/fleet/services"), whose value is the instance's
// JSON record (registry.Instance.Marshal). The key is attached to a lease
// of TTL seconds owned by the Registrar that wrote it, one lease per
// instance.
//
// Registrar: Register grants the lease, puts the key and keeps the lease
// alive (clientv3 KeepAlive, every TTL/3). When the lease is lost (etcd
// reports it expired or revoked, or no keep-alive answer arrived within
// TTL, e.g. during a long outage) it grants a new lease and puts the key
// again by itself, retrying with backoff until etcd answers. Update puts
// the new record under the same lease; Deregister deletes the key and
// revokes the lease; Close stops the keep-alives only, so the keys expire
// TTL later.
//
// Discovery: Instances is one prefix Get. Watch does a prefix Get,
// delivers the full list, then watches the prefix from the Get's revision
// and delivers the full list after each batch of events that changes it
// (a put of the same record changes nothing). It keeps the list sorted as
// events arrive (regutil.Sorted), so an event costs a binary search and a
// copy of the service's list, not a sort or a deep copy; the lists share
// their instances' Tags and Meta. On a watch error
// or compaction, or when the client's connection comes back after being
// lost (an etcd restart), it gets the prefix again and delivers the
// current list. While etcd is unreachable nothing is delivered and
// Instances answers with the last list it saw.
//
// The etcd client's zap logs are forwarded to Config.Logger (log/slog).
//
// This package owns the etcd backend: it is a module of its own, so that
// etcd's client (go.etcd.io/etcd/client/v3) stays out of the core module's graph. It imports registry and
// registry/internal/regutil; it must not import client or server, which
// take it as a registry.Registrar or registry.Discovery. PolicyStore keeps
// traffic policy documents (/fleet/policies/<service>) for package
// github.com/fleetrpc/fleet/policy, which it does not import; it imports
// the root package fleet for its error codes.
package etcd
