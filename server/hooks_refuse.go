package server

import "github.com/fleetrpc/fleet"

// CallRefusedHook is called for each request the server answers without
// running any handler, interceptor or other hook: the server is shutting
// down (fleet.ShuttingDown), the service or method is unknown
// (fleet.NotFound), or the per-connection concurrency cap is reached
// (fleet.ResourceExhausted). service and method are as the client sent
// them: callers choose them, so a plugin must not use them as unbounded
// metric labels. err is the *fleet.Error the caller receives (oneway
// requests are refused without an answer). It runs on the connection's read
// loop and must be quick.
type CallRefusedHook interface {
	OnCallRefused(service, method string, err *fleet.Error)
}
