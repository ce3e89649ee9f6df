package server

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/fleetrpc/fleet"
)

// Handle serves fn as service.method: the typed, generic way to register a
// method, and the fast one. Each call decodes its arguments into a fresh
// *A, passes a fresh *R for the reply and encodes *R when fn returns nil;
// nothing is called through package reflect and nothing is reused between
// calls, so fn may keep args and reply. ctx carries the call's deadline,
// metadata and CallInfo, as for Register.
//
// The reply starts as the zero R, except that a slice R starts empty (not
// nil) and a map R starts as an empty map, as Register prepares replies;
// making that map is the one step that uses package reflect (once per call,
// only when R is a map type).
//
// The service may also hold methods registered by Register, RegisterName,
// RegisterFunction or other Handle calls; interceptors and hooks see args
// and reply as the *A and *R values. Handle fails when service or method
// is empty, fn is nil, or service.method is already registered. It is safe
// for concurrent use; register before serving.
func Handle[A, R any](s *Server, service, method string, fn func(ctx context.Context, args *A, reply *R) error) error {
	if fn == nil {
		return fmt.Errorf("server: Handle %s.%s: nil function", service, method)
	}
	if method == "" {
		return errors.New("server: Handle: empty method name")
	}
	h := &typed[A, R]{fn: fn}
	switch t := reflect.TypeFor[R](); t.Kind() {
	case reflect.Map:
		h.makeMap = func(r *R) { reflect.ValueOf(r).Elem().Set(reflect.MakeMap(t)) }
	case reflect.Slice:
		// An empty slice of capacity 0 can be shared: append copies it,
		// and there is no element to write through.
		h.empty, h.hasEmpty = reflect.MakeSlice(t, 0, 0).Interface().(R), true
	}
	m := &methodType{service: service, name: method, newArgs: h.newArgs, newReply: h.newReply, invoke: h.invoke, newPair: h.newPair, newWithCtx: h.newWithCtx}
	return s.addMethods(service, map[string]*methodType{method: m}, true)
}

// typed is a Handle method: per call, one allocation for the call's
// context, args and reply (newWithCtx) and a type assertion each for args
// and reply.
type typed[A, R any] struct {
	fn       func(ctx context.Context, args *A, reply *R) error
	makeMap  func(*R) // set when R is a map type
	empty    R        // the empty slice, when R is a slice type
	hasEmpty bool
}

func (h *typed[A, R]) newArgs() any { return new(A) }

func (h *typed[A, R]) newReply() any {
	r := new(R)
	if h.hasEmpty {
		*r = h.empty
	} else if h.makeMap != nil {
		h.makeMap(r)
	}
	return r
}

// newPair returns args and reply from one allocation, the reply prepared
// as newReply prepares it.
func (h *typed[A, R]) newPair() (args, reply any) {
	p := new(struct {
		a A
		r R
	})
	if h.hasEmpty {
		p.r = h.empty
	} else if h.makeMap != nil {
		h.makeMap(&p.r)
	}
	return &p.a, &p.r
}

// newWithCtx returns a zero callCtx, args and reply from one allocation,
// with a buffer for the request's metadata section when it fits
// (inlineMD).
func (h *typed[A, R]) newWithCtx(mdSize int) (cctx *callCtx, args, reply any, mdBuf []byte) {
	if inlineMD(mdSize) {
		p := new(struct {
			c  callCtx
			a  A
			r  R
			md mdArray
		})
		h.prepare(&p.r)
		return &p.c, &p.a, &p.r, p.md[:0]
	}
	p := new(struct {
		c callCtx
		a A
		r R
	})
	h.prepare(&p.r)
	return &p.c, &p.a, &p.r, nil
}

// prepare makes *r the reply newReply would return.
func (h *typed[A, R]) prepare(r *R) {
	if h.hasEmpty {
		*r = h.empty
	} else if h.makeMap != nil {
		h.makeMap(r)
	}
}

func (h *typed[A, R]) invoke(ctx context.Context, args, reply any) error {
	a, ok := args.(*A)
	r, ok2 := reply.(*R)
	if !ok || !ok2 {
		return fleet.Errorf(fleet.Internal, "handler called with %T and %T, want %T and %T", args, reply, a, r)
	}
	return h.fn(ctx, a, r)
}
