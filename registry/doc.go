// Package registry defines how Fleet servers announce themselves and how
// clients find them: a server-side Registrar and a client-side Discovery,
// two small interfaces with one implementation per backend in the
// subpackages (static, etcd, zookeeper, redis, nats, mdns). A Discovery
// that can enumerate its registry's services also implements the optional
// ServiceLister (every backend but mdns).
//
// This package has no dependencies beyond the standard library, so core
// packages may import it; the backends' clients live only in their
// subpackages.
//
// It owns the Instance record and the two interfaces. It must not import
// any other Fleet package, not even the root package (the root package's
// TestPackageImports checks it).
package registry
