package server

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/internal/ctxkey"
	"github.com/fleetrpc/fleet/protocol"
)

// callCtx is a handler's context: the connection's (or the deadline's)
// context plus the call's info, in one allocation.
type callCtx struct {
	context.Context
	info fleet.CallInfo
	// dl is the call's deadline context when the request has a deadline
	// (hasDL); see lazyDeadlineCtx. end releases it.
	dl    lazyDeadlineCtx
	hasDL bool
	// lazy is the cancel-frame context of a tracked call (see track),
	// kept here so that the call's contexts take one allocation.
	lazy lazyCancelCtx
	// slot holds the context while reflectMethod.invoke hands it to
	// reflect.Value.Call (a Value needs an addressable variable, which
	// would otherwise be allocated per call); slotBusy guards it against
	// an interceptor running the handler twice at once.
	slot     context.Context
	slotBusy atomic.Bool
}

// freeSlot ends reflectMethod.invoke's use of slot.
func (c *callCtx) freeSlot() {
	c.slot = nil
	c.slotBusy.Store(false)
}

// callCtxKey is the context key under which a callCtx answers itself, so
// that reflectMethod.invoke finds the call's slot under the contexts
// interceptors derive from it.
type callCtxKey struct{}

// newCallCtx builds a call's context from its frame: the connection's
// context, with the frame's deadline when it has one.
func (c *conn) newCallCtx(f *protocol.Frame, service, method string) *callCtx {
	cctx, mdBuf := newCallCtxMD(f.MetadataSize())
	c.initCallCtx(cctx, f, service, method, mdBuf)
	return cctx
}

// initCallCtx makes the zero cctx a call's context, as newCallCtx does.
// The request's metadata section is copied into mdBuf when it fits
// there (mdBuf is then part of cctx's allocation and written only here),
// else into a string of its own.
func (c *conn) initCallCtx(cctx *callCtx, f *protocol.Frame, service, method string, mdBuf []byte) {
	cctx.Context = c.ctx
	cctx.info = fleet.CallInfo{
		Service: service, Method: method,
		RemoteAddr: c.remote, LocalAddr: c.local, Oneway: f.Flags&protocol.FlagOneway != 0,
		Route: fleet.RouteNative,
	}
	cctx.info.SetWireMetadata(f.MetadataSectionIn(mdBuf))
	if f.Timeout > 0 {
		cctx.dl.Context = c.ctx
		cctx.dl.deadline = time.Now().Add(time.Duration(f.Timeout) * time.Millisecond)
		cctx.Context, cctx.hasDL = &cctx.dl, true
	}
}

// end releases what the call's context holds (the deadline's timer
// context, if one was made). It runs once, when the call is over or
// refused.
func (c *callCtx) end() {
	if c.hasDL {
		c.dl.release()
	}
}

func (c *callCtx) Value(key any) any {
	switch key.(type) {
	case ctxkey.CallInfo:
		return &c.info
	case callCtxKey:
		return c
	}
	return c.Context.Value(key)
}
