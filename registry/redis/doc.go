// Package redis is the registry on Redis (github.com/redis/go-redis/v9).
//
// Layout: each instance is a string key Prefix:<service>:<instance Key>
// (Prefix defaults to "fleet:services") holding the instance's JSON
// record (registry.Instance.Marshal), with an expiry of TTL. Register,
// Update and Deregister publish a notification ("register <Key>",
// "update <Key>", "deregister <Key>") on the service's channel,
// Prefix:<service>.
//
// Registrar: Register sets the key with SET EX and refreshes its expiry
// every TTL/3; when the refresh finds the key gone (Redis restarted or
// flushed, or the key was deleted) it sets it again and publishes
// "restore <Key>". Update sets the new record; Deregister stops the
// refresh, deletes the key and publishes; Close stops the refreshes only,
// so the keys expire TTL later.
//
// Discovery: Instances scans the service's keys with SCAN MATCH (never
// KEYS) and reads them. Watch subscribes to the service's channel and
// reads again on every notification. An expiry publishes nothing, so
// Watch also reads again every PollInterval (TTL/2 by default); it
// subscribes to the keyspace notifications of the service's keys too
// (__keyspace@<DB>__:Prefix:<service>:*), which deliver expiries at once
// when the server has them enabled ("K" and "x" in
// notify-keyspace-events), which Config.KeyspaceEvents asks for. A list
// is delivered only when it changed, and always after the connection to
// Redis comes back.
//
// Redis Cluster is not supported: SCAN would cover one node only.
//
// This package owns the redis backend: it is a module of its own, so that
// the Redis client (github.com/redis/go-redis) stays out of the core module's graph. It imports registry and
// registry/internal/regutil; it must not import client or server, which
// take it as a registry.Registrar or registry.Discovery. PolicyStore keeps
// traffic policy documents (fleet:policies:<service>) for package
// github.com/fleetrpc/fleet/policy, which it does not import; it imports
// the root package fleet for its error codes.
package redis
