// Package embedded runs a single-member etcd in-process on free loopback
// ports, for `fleet demo` and Fleet's tests. Stop and Start restart it on
// the same ports and data, like a server process restarting.
//
// It owns starting and stopping the embedded server. It imports etcd's
// server packages and no Fleet package; only cmd/fleet and tests import it.
package embedded
