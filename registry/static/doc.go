// Package static is the registry without a server: a Discovery over a
// fixed list of instances (one peer or many), and a Registrar that adds
// to an in-memory Table that the Table's Discovery sees, which makes it
// the registry for tests and single-process setups.
//
// Records registered through a Registrar live as long as that Registrar:
// Deregister removes one, Close removes all of them at once (the
// in-memory equivalent of their TTL running out). Instances given in
// Config live as long as the Table unless deregistered. Watch delivers the
// current list and then every change; over a fixed list that means once.
//
// This package owns the in-memory table and nothing else. It imports only
// registry and registry/internal/regutil; it must not import client,
// server, protocol or selector (the root package's TestPackageImports
// checks this).
package static
