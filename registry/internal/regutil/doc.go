// Package regutil holds what every registry backend needs and users must
// not depend on: the Feed that hands lists to a Watch channel, the Life
// that ties goroutines to Close, the Registrations skeleton of the
// Registrars that keep each record alive in a goroutine, retry backoff, a
// last-list cache and list helpers. Everything here is safe for
// concurrent use unless stated.
//
// It imports only registry; it must not import client, server or any
// backend's client library (the backends import it).
package regutil
