// Package testutil holds helpers for Fleet's own tests: loopback servers
// and self-signed TLS configurations. Not for use outside Fleet.
//
// It may import server; it must not import client, so that client tests
// and server tests can both use it without cycles.
package testutil
