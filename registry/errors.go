package registry

import "errors"

// Errors shared by every backend. Backends wrap them with context, so test
// with errors.Is.
var (
	// ErrClosed is returned by every method of a Registrar or Discovery
	// called after its Close.
	ErrClosed = errors.New("registry: closed")
	// ErrNotRegistered is returned by Registrar.Update for an instance
	// that Registrar has not registered (or has deregistered).
	ErrNotRegistered = errors.New("registry: instance not registered")
)
