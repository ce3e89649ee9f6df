// Package nats is the registry on a NATS JetStream key-value bucket
// (github.com/nats-io/nats.go/jetstream).
//
// Layout: one bucket, Bucket (default "fleet_services"), holds every
// service; each instance is the key <service>.<instance Key>, both parts
// escaped by EncodeToken to the characters NATS keys allow, whose value
// is the instance's JSON record (registry.Instance.Marshal). The bucket's
// MaxAge ("TTL" in jetstream.KeyValueConfig) is the records' time to
// live; whoever opens the bucket first creates it with MaxAge = TTL and
// history 1. A record outlives a dead Registrar by at most MaxAge.
//
// Registrar: Register puts the key and puts it again every MaxAge/3,
// which restarts its age (and restores it after a server restart or a
// purge). Update puts the new record; Deregister stops the refresh and
// deletes the key (a delete marker); Close stops the refreshes only.
//
// Discovery: Instances reads the last value of each key of the service.
// Watch runs kv.Watch("<service>.>"): it delivers the full list once the
// initial values are in and after every put or delete. Before nats-server
// 2.11 a key aged out by MaxAge disappears without any marker, so no
// watcher hears of it: Watch therefore restarts its kv.Watch every
// PollInterval (default TTL/2) and delivers the list again if it
// changed. On nats-server 2.11 and later the bucket is created with
// LimitMarkerTTL, so an expiry also leaves a marker that watchers see at
// once. After the server was unreachable the current list is delivered
// again.
//
// This package owns the nats backend: it is a module of its own, so that
// the NATS client (github.com/nats-io/nats.go) stays out of the core module's graph. It imports registry and
// registry/internal/regutil; it must not import client or server, which
// take it as a registry.Registrar or registry.Discovery. PolicyStore keeps
// traffic policy documents (the fleet_policies bucket) for package
// github.com/fleetrpc/fleet/policy, which it does not import; it imports
// the root package fleet for its error codes.
package nats
