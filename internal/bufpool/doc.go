// Package bufpool pools byte buffers in size classes so that frame encoding
// and decoding allocate nothing in the steady state. Buffers larger than the
// largest class are never pooled, so one huge frame cannot pin memory, and
// sync.Pool drops idle buffers at garbage collection.
//
// Fleet's protocol, client and server share these pools; users cannot reach
// them (protocol.Reader hands out pooled buffers that users may drop). This
// package owns the size classes and the pools only; it must not import any
// other package of Fleet (the root package's TestPackageImports checks it).
package bufpool
