// Package zookeeper is the registry on Apache ZooKeeper
// (github.com/go-zookeeper/zk).
//
// Layout: each instance is an ephemeral znode
// Root/<service>/<url.QueryEscape(instance Key)> (Root defaults to
// "/fleet/services") whose data is the instance's JSON record
// (registry.Instance.Marshal). Root and the service znodes are created
// as persistent nodes when missing. The ephemeral znodes belong to the
// Registrar's session, so they vanish when its session ends: at Close at
// once, or SessionTimeout after the process dies or loses the network.
//
// Registrar: when the session expires (the client reconnects after more
// than SessionTimeout and ZooKeeper reports it expired) the client opens
// a new session and the Registrar creates its znodes again by itself. A
// znode left at the same path by another session (this server's previous
// process, still within its timeout) is replaced.
//
// Discovery: Instances reads the children of the service znode and their
// data. Watch sets a children watch on the service znode (an exists watch
// while it does not exist yet) and a data watch on each child, and
// delivers the full list after every change. When the session is
// re-established after a disconnection it delivers the current list
// again; when a new session replaces an expired one (its watches are
// lost) it reads everything again.
//
// The zk client's logs go to Config.Logger (log/slog) instead of
// log.Printf.
//
// This package owns the zookeeper backend: it is a module of its own, so that
// the ZooKeeper client (github.com/go-zookeeper/zk) stays out of the core module's graph. It imports registry and
// registry/internal/regutil; it must not import client or server, which
// take it as a registry.Registrar or registry.Discovery. PolicyStore keeps
// traffic policy documents (/fleet/policies/<service>) for package
// github.com/fleetrpc/fleet/policy, which it does not import; it imports
// the root package fleet for its error codes.
package zookeeper
