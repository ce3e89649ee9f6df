package server

import (
	"context"
	"net"

	"github.com/fleetrpc/fleet"
)

// The hook interfaces. A plugin added with WithPlugin implements any subset;
// each hook point calls the plugins that implement it, in the order added.
// Hooks run on the connection's or the call's goroutine: they must be safe
// for concurrent use and quick.

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

// PreReadHook is called before the server waits for the next frame on a
// connection. An error closes the connection.
type PreReadHook interface {
	PreReadRequest(ctx context.Context) error
}

// PostReadHook is called after a request frame was read and parsed, with
// the call's info, before dispatch. An error fails the call with that
// error (code Unknown unless it is a *fleet.Error).
type PostReadHook interface {
	PostReadRequest(ctx context.Context, info *fleet.CallInfo) error
}

// PreWriteHook is called after the handler returned and before the
// response is encoded, with the handler's error. An error replaces the
// handler's outcome.
type PreWriteHook interface {
	PreWriteResponse(ctx context.Context, info *fleet.CallInfo, reply any, err error) error
}

// PostWriteHook is called after the response was queued for writing, with
// the error of queuing it (nil on success).
type PostWriteHook interface {
	PostWriteResponse(ctx context.Context, info *fleet.CallInfo, err error)
}

type hooks struct {
	register  []RegisterHook
	accept    []ConnAcceptHook
	closed    []ConnCloseHook
	preRead   []PreReadHook
	postRead  []PostReadHook
	preWrite  []PreWriteHook
	postWrite []PostWriteHook
	refused   []CallRefusedHook
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
	if x, ok := p.(PreReadHook); ok {
		h.preRead = append(h.preRead, x)
	}
	if x, ok := p.(PostReadHook); ok {
		h.postRead = append(h.postRead, x)
	}
	if x, ok := p.(PreWriteHook); ok {
		h.preWrite = append(h.preWrite, x)
	}
	if x, ok := p.(PostWriteHook); ok {
		h.postWrite = append(h.postWrite, x)
	}
	if x, ok := p.(CallRefusedHook); ok {
		h.refused = append(h.refused, x)
	}
}
