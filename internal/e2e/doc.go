// Package e2e holds Fleet's end-to-end tests that span packages: servers,
// XClients and a real registry together.
package e2e
