package server

import (
	"context"
	"errors"
	"fmt"
	"go/token"
	"reflect"
	"sort"
	"sync/atomic"
	"unsafe"

	"github.com/fleetrpc/fleet"
)

// methodType is one callable method, resolved once at registration.
type methodType struct {
	service, name string
	argType       reflect.Type // the element type of *A
	replyType     reflect.Type // the element type of *R
	hasCtx        bool
	replyHint     atomic.Int64 // size of the last response frame, to size the next buffer

	// Fast paths: the method's code called directly with pointer-shaped
	// arguments. Set when the receiver is a pointer (or there is none).
	rcvr      unsafe.Pointer
	withRcvr  bool
	fnCtx     func(rcvr unsafe.Pointer, ctx context.Context, args, reply unsafe.Pointer) error
	fnCtxFree func(ctx context.Context, args, reply unsafe.Pointer) error
	fnNoCtx   func(rcvr unsafe.Pointer, args, reply unsafe.Pointer) error
	fnNoCtxF  func(args, reply unsafe.Pointer) error

	// Slow path, used when the fast path does not apply.
	fn       reflect.Value
	rcvrVal  reflect.Value
	slowPath bool
}

type service struct {
	name    string
	methods map[string]*methodType
}

var (
	typeOfError   = reflect.TypeFor[error]()
	typeOfContext = reflect.TypeFor[context.Context]()
)

// eface is the layout of an interface{} value.
type eface struct {
	typ, data unsafe.Pointer
}

// funcWord returns the code word of a func value stored in an interface.
func funcWord(fn any) unsafe.Pointer { return (*eface)(unsafe.Pointer(&fn)).data }

// call runs the method on freshly allocated args and reply pointers.
func (m *methodType) call(ctx context.Context, args, reply reflect.Value) error {
	if m.slowPath {
		var in []reflect.Value
		if m.rcvrVal.IsValid() {
			in = append(in, m.rcvrVal)
		}
		if m.hasCtx {
			in = append(in, reflect.ValueOf(ctx))
		}
		in = append(in, args, reply)
		out := m.fn.Call(in)
		if e := out[0].Interface(); e != nil {
			return e.(error)
		}
		return nil
	}
	a, r := args.UnsafePointer(), reply.UnsafePointer()
	switch {
	case m.hasCtx && m.withRcvr:
		return m.fnCtx(m.rcvr, ctx, a, r)
	case m.hasCtx:
		return m.fnCtxFree(ctx, a, r)
	case m.withRcvr:
		return m.fnNoCtx(m.rcvr, a, r)
	default:
		return m.fnNoCtxF(a, r)
	}
}

// checkSignature validates ins (the parameter types after any receiver)
// and returns whether the first is a context.
func checkSignature(where string, ft reflect.Type, skip int) (hasCtx bool, argT, replyT reflect.Type, err error) {
	n := ft.NumIn() - skip
	if ft.NumOut() != 1 || ft.Out(0) != typeOfError {
		return false, nil, nil, fmt.Errorf("server: %s must return exactly one error", where)
	}
	switch n {
	case 3:
		if ft.In(skip) != typeOfContext {
			return false, nil, nil, fmt.Errorf("server: %s: first argument must be context.Context", where)
		}
		hasCtx = true
		skip++
	case 2:
	default:
		return false, nil, nil, fmt.Errorf("server: %s must take (ctx, *Args, *Reply) or (*Args, *Reply)", where)
	}
	a, r := ft.In(skip), ft.In(skip+1)
	if a.Kind() != reflect.Pointer || r.Kind() != reflect.Pointer {
		return false, nil, nil, fmt.Errorf("server: %s: args and reply must be pointers", where)
	}
	if !exportedOrBuiltin(a.Elem()) || !exportedOrBuiltin(r.Elem()) {
		return false, nil, nil, fmt.Errorf("server: %s: args and reply types must be exported", where)
	}
	return hasCtx, a.Elem(), r.Elem(), nil
}

func exportedOrBuiltin(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return token.IsExported(t.Name()) || t.PkgPath() == ""
}

// newService builds the method table of rcvr under name.
func newService(name string, rcvr any) (*service, error) {
	if rcvr == nil {
		return nil, errors.New("server: nil receiver")
	}
	rv := reflect.ValueOf(rcvr)
	rt := rv.Type()
	if name == "" {
		name = reflect.Indirect(rv).Type().Name()
	}
	if name == "" {
		return nil, fmt.Errorf("server: no service name for type %s", rt)
	}
	s := &service{name: name, methods: map[string]*methodType{}}
	for i := 0; i < rt.NumMethod(); i++ {
		m := rt.Method(i)
		if !m.IsExported() {
			continue
		}
		where := name + "." + m.Name
		hasCtx, argT, replyT, err := checkSignature(where, m.Type, 1)
		if err != nil {
			continue // not an RPC method, as net/rpc does
		}
		mt := &methodType{service: name, name: m.Name, argType: argT, replyType: replyT, hasCtx: hasCtx}
		if rt.Kind() == reflect.Pointer {
			// m.Func is the method expression func(*T, ...); its code
			// word takes the receiver as a plain pointer argument.
			mt.withRcvr = true
			mt.rcvr = rv.UnsafePointer()
			w := funcWord(m.Func.Interface())
			if hasCtx {
				*(*unsafe.Pointer)(unsafe.Pointer(&mt.fnCtx)) = w
			} else {
				*(*unsafe.Pointer)(unsafe.Pointer(&mt.fnNoCtx)) = w
			}
		} else {
			mt.slowPath = true
			mt.fn = m.Func
			mt.rcvrVal = rv
		}
		s.methods[m.Name] = mt
	}
	if len(s.methods) == 0 {
		return nil, fmt.Errorf("server: type %s has no exported methods of the form M(ctx, *Args, *Reply) error or M(*Args, *Reply) error", rt)
	}
	return s, nil
}

// newFunction builds a method from a plain function.
func newFunction(svc, method string, fn any) (*methodType, error) {
	fv := reflect.ValueOf(fn)
	if fv.Kind() != reflect.Func {
		return nil, fmt.Errorf("server: %s.%s: %T is not a function", svc, method, fn)
	}
	hasCtx, argT, replyT, err := checkSignature(svc+"."+method, fv.Type(), 0)
	if err != nil {
		return nil, err
	}
	mt := &methodType{service: svc, name: method, argType: argT, replyType: replyT, hasCtx: hasCtx}
	w := funcWord(fn)
	if hasCtx {
		*(*unsafe.Pointer)(unsafe.Pointer(&mt.fnCtxFree)) = w
	} else {
		*(*unsafe.Pointer)(unsafe.Pointer(&mt.fnNoCtxF)) = w
	}
	return mt, nil
}

func (s *service) methodNames() []string {
	names := make([]string, 0, len(s.methods))
	for n := range s.methods {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// unknown builds the NotFound error for a lookup miss.
func unknown(svc, method []byte, haveService bool) *fleet.Error {
	if !haveService {
		return fleet.Errorf(fleet.NotFound, "unknown service %q", svc)
	}
	return fleet.Errorf(fleet.NotFound, "unknown method %q of service %q", method, svc)
}
