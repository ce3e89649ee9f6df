// Package transport holds what Fleet's server and client share on a
// connection: the coalescing frame writer, and Raw, which reads and writes
// a TCP or Unix socket with raw system calls (Linux; the build tag
// fleet_noraw, or another OS, gives the plain connection).
//
// It owns the per-connection write path (coalescing queued frames into
// few syscalls, write deadlines). It must not import any other Fleet
// package: it moves bytes and knows nothing of frames' contents (the root
// package's TestPackageImports checks it).
package transport
