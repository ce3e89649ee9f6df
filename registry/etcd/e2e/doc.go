// Package e2e holds end-to-end tests that span Fleet's packages: servers,
// XClients and a real (in-process) etcd registry together. It has no
// non-test code.
//
// It may import any Fleet package; nothing imports it.
package e2e
