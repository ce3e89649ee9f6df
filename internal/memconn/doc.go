// Package memconn is an in-memory, buffered, full-duplex connection: two
// net.Conn ends joined without a socket, the connection of Fleet's
// in-process transport (client.InProcess and the "inprocess" network of
// package transport).
//
// Unlike net.Pipe, whose Write waits until the peer has read every byte,
// each direction has a buffer (like a socket's): Write returns once its
// bytes are buffered and blocks only while the buffer is full. Two ends
// that write to each other at the same moment therefore do not deadlock,
// as they would over net.Pipe when neither is reading.
//
// It must not import any other Fleet package (the root package's
// TestPackageImports checks it).
package memconn
