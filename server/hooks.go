package server

import "net"

// The hook interfaces: the plug-in points that are not per call
// (RegisterHook, ConnAcceptHook, ConnCloseHook, and CallRefusedHook in
// hooks_refuse.go). A plugin added with WithPlugin implements any subset;
// each hook point calls the plugins that implement it, in the order added.
// Hooks run on the registering goroutine or the connection's: they must be
// safe for concurrent use and quick. What runs around each call or stream
// is an Interceptor's (interceptor.go).

// RegisterHook is called when a service is registered; an error fails the
// registration.
type RegisterHook interface {
	OnRegister(service string, methods []string) error
}

// ConnAcceptHook is called for each accepted connection before it is
// served. It may wrap the connection (return a different net.Conn) or
// refuse it (return false: the connection is closed).
type ConnAcceptHook interface {
	OnConnAccept(conn net.Conn) (net.Conn, bool)
}

// ConnCloseHook is called once when a connection is closed.
type ConnCloseHook interface {
	OnConnClose(conn net.Conn)
}

type hooks struct {
	register []RegisterHook
	accept   []ConnAcceptHook
	closed   []ConnCloseHook
	refused  []CallRefusedHook
}

func (h *hooks) add(p any) {
	if x, ok := p.(RegisterHook); ok {
		h.register = append(h.register, x)
	}
	if x, ok := p.(ConnAcceptHook); ok {
		h.accept = append(h.accept, x)
	}
	if x, ok := p.(ConnCloseHook); ok {
		h.closed = append(h.closed, x)
	}
	if x, ok := p.(CallRefusedHook); ok {
		h.refused = append(h.refused, x)
	}
}
