// Package tcpproxy is a loopback TCP forwarder for registry tests: a
// client dials the proxy instead of the real server, and the test cuts the
// network between them (Block) and restores it (Unblock) to exercise
// reconnects and session expiry against a real, shared server without
// restarting it.
//
// It owns the forwarder only and must not import any other Fleet package.
package tcpproxy
