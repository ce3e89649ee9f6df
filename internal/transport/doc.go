// Package transport holds what Fleet's server and client share on a
// connection: the coalescing frame writer.
//
// It owns the per-connection write path (coalescing queued frames into
// few syscalls, write deadlines). It must not import any other Fleet
// package: it moves bytes and knows nothing of frames' contents (the root
// package's TestPackageImports checks it).
package transport
