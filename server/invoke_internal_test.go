package server

import (
	"context"
	"reflect"
	"testing"
)

type InvokeArgs struct{ N int }
type InvokeReply struct{ N int }

type derivedKey struct{}

// derivedCtx is a context an interceptor derives from the call's; made
// once here, so that deriving it costs the test no allocation.
type derivedCtx struct{ context.Context }

func (c *derivedCtx) Value(key any) any {
	if key == (derivedKey{}) {
		return "derived"
	}
	return c.Context.Value(key)
}

// TestInvokeDerivedContext: a reflect-called handler gets the context
// the interceptors passed on, derived from the call's or not, and calling
// it with one derived from the call's context allocates no more than
// with the call's own (the call's slot holds it). A context not derived
// from the call's still works.
func TestInvokeDerivedContext(t *testing.T) {
	var got context.Context
	fn := func(ctx context.Context, a *InvokeArgs, r *InvokeReply) error {
		got = ctx
		r.N = a.N
		return nil
	}
	fv := reflect.ValueOf(fn)
	r, err := checkSignature(fv.Type(), 0)
	if err != nil {
		t.Fatal(err)
	}
	r.fn = fv
	cctx := &callCtx{Context: context.Background()}
	derived := &derivedCtx{cctx}
	other := &derivedCtx{context.Background()}
	args, reply := &InvokeArgs{N: 7}, &InvokeReply{}
	for _, ctx := range []context.Context{cctx, derived, other} {
		got, reply.N = nil, 0
		if err := r.invoke(ctx, args, reply); err != nil || got != ctx || reply.N != 7 {
			t.Fatalf("invoke(%T): err %v, handler got %v, reply %d", ctx, err, got, reply.N)
		}
		if cctx.slot != nil || cctx.slotBusy.Load() {
			t.Fatalf("invoke(%T) left the slot in use", ctx)
		}
	}
	own := testing.AllocsPerRun(100, func() { _ = r.invoke(cctx, args, reply) })
	der := testing.AllocsPerRun(100, func() { _ = r.invoke(derived, args, reply) })
	if der > own {
		t.Fatalf("invoke with a derived context allocates %v times, with the call's %v", der, own)
	}
	// A second use of the slot while it is busy takes a variable of its own.
	cctx.slotBusy.Store(true)
	if err := r.invoke(derived, args, reply); err != nil || got != derived {
		t.Fatalf("invoke with the slot busy: err %v, handler got %v", err, got)
	}
	if !cctx.slotBusy.Load() {
		t.Fatal("invoke freed a slot it did not take")
	}
	cctx.slotBusy.Store(false)
}
