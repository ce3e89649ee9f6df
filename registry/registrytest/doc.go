// Package registrytest is the conformance suite every registry backend
// runs against a real server: Run checks the registry.Registrar and
// registry.Discovery contracts (register, discover, watch, update,
// deregister, expiry after a Registrar dies, close); DiscoveryOutage and
// RegistrarOutage check recovery from a cut-off connection; and the
// helpers (ServiceName, WaitFor, WaitInstances, Next, Logger,
// Constructor) serve backend-specific tests.
//
// It imports package testing, so only _test files should import it.
//
// This package owns the registry contract's tests. It imports only
// registry; it must not import client or server, and no backend (each
// backend imports it from its own tests).
package registrytest
