// Package e2e holds end-to-end tests that span Fleet's packages: servers,
// XClients and a real (in-process) etcd registry together. It has no
// non-test code.
package e2e
