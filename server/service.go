package server

import (
	"context"
	"errors"
	"fmt"
	"go/token"
	"log/slog"
	"reflect"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/fleetrpc/fleet"
)

// methodType is one callable method, resolved once at registration. The
// three functions are its whole per-call interface: the dispatcher does not
// know whether they are a typed Handle (no reflection) or a reflective
// net/rpc-style method.
type methodType struct {
	service, name string
	replyHint     atomic.Int64 // size of the last response frame, to size the next buffer

	// newArgs returns a fresh pointer to decode the arguments into.
	newArgs func() any
	// newReply returns a fresh pointer to the reply, prepared as net/rpc
	// prepares it (a map or slice reply is made, not nil).
	newReply func() any
	// invoke runs the method on pointers from newArgs and newReply (or
	// pointers of the same types, after an interceptor).
	invoke func(ctx context.Context, args, reply any) error
	// chain runs invoke inside the server's interceptors, with panic
	// recovery; set once, when the method is registered (setChain).
	chain UnaryFunc
	// newPair, when set, returns what newArgs and newReply would, from
	// one allocation (a struct holding both); see newCall.
	newPair func() (args, reply any)
	// newWithCtx, when set, returns a zero callCtx with what newPair
	// would, all from one allocation; see newCallWithCtx.
	newWithCtx func(mdSize int) (cctx *callCtx, args, reply any, mdBuf []byte)
}

// mdInline is the size of the buffer a call's allocation holds for the
// request's metadata section when the section fits, so that the copy the
// call keeps (CallInfo's wire metadata) takes no allocation of its own: a
// W3C traceparent pair takes 68 bytes. Calls without metadata, or with
// more, get the allocation without it.
const mdInline = 80

// mdArray is the metadata buffer of a call's allocation.
type mdArray = [mdInline]byte

// typeOfMDArray is the type of an mdArray.
var typeOfMDArray = reflect.TypeFor[mdArray]()

// inlineMD reports whether a metadata section of mdSize bytes goes into
// the call's allocation.
func inlineMD(mdSize int) bool { return mdSize > 0 && mdSize <= mdInline }

// newCallWithCtx returns a zero callCtx and fresh args and reply for one
// call, from a single allocation when the method has newWithCtx (as for
// newCall, a handler that keeps one of them keeps all three alive).
// With mdSize, the length of the request's metadata section, it also
// returns a buffer of that allocation for the section when it fits
// (inlineMD; empty, of capacity mdInline), else nil.
func (m *methodType) newCallWithCtx(mdSize int) (cctx *callCtx, args, reply any, mdBuf []byte) {
	if m.newWithCtx != nil {
		return m.newWithCtx(mdSize)
	}
	args, reply = m.newCall()
	cctx, mdBuf = newCallCtxMD(mdSize)
	return cctx, args, reply, mdBuf
}

// newCallCtxMD returns a zero callCtx and, when a metadata section of
// mdSize bytes fits (inlineMD), a buffer for it from the same allocation.
func newCallCtxMD(mdSize int) (*callCtx, []byte) {
	if !inlineMD(mdSize) {
		return new(callCtx), nil
	}
	p := new(struct {
		c  callCtx
		md mdArray
	})
	return &p.c, p.md[:0]
}

// newCall returns fresh args and reply pointers for one call: from a
// single allocation when the method has newPair. Sharing an allocation
// means a handler that keeps one of them also keeps the other alive,
// which costs memory but never correctness.
func (m *methodType) newCall() (args, reply any) {
	if m.newPair != nil {
		return m.newPair()
	}
	return m.newArgs(), m.newReply()
}

type service struct {
	name    string
	methods map[string]*methodType
}

var (
	typeOfError   = reflect.TypeFor[error]()
	typeOfContext = reflect.TypeFor[context.Context]()
)

// reflectMethod calls a net/rpc-style method or a plain function through
// package reflect: registration resolves the types once, each call costs
// one reflect.Value.Call.
type reflectMethod struct {
	fn         reflect.Value // the method expression (receiver first) or the function
	rcvr       reflect.Value // the receiver; invalid for a plain function
	hasCtx     bool
	argPtr     reflect.Type // *A: what newArgs returns and decoding fills
	argIsValue bool         // the method takes A, not *A
	replyPtr   reflect.Type // *R, as the method takes it
	pair       reflect.Type // struct{ A; R }, for newPair; nil if reflect could not make it
	withCtx    reflect.Type // struct{ callCtx; A; R }, for newWithCtx; nil likewise
	withCtxMD  reflect.Type // struct{ callCtx; A; R; mdArray }, likewise
}

func (r *reflectMethod) newArgs() any { return reflect.New(r.argPtr.Elem()).Interface() }

func (r *reflectMethod) newReply() any {
	t := r.replyPtr.Elem()
	v := reflect.New(t)
	prepareReply(v)
	return v.Interface()
}

// prepareReply makes a map or slice reply (v points to it), as net/rpc
// does, so the handler can fill it without checking for nil.
func prepareReply(v reflect.Value) {
	switch t := v.Type().Elem(); t.Kind() {
	case reflect.Map:
		v.Elem().Set(reflect.MakeMap(t))
	case reflect.Slice:
		v.Elem().Set(reflect.MakeSlice(t, 0, 0))
	}
}

// newPair allocates a struct of the argument and reply types (pair, made
// by structOf) and returns pointers to its two fields.
func (r *reflectMethod) newPair() (args, reply any) {
	p := reflect.New(r.pair).Elem()
	rp := p.Field(1).Addr()
	prepareReply(rp)
	return p.Field(0).Addr().Interface(), rp.Interface()
}

// newWithCtx allocates a struct of a callCtx and the argument and reply
// types (withCtx, made by structOf) and returns pointers to its fields.
// With a metadata section that fits (inlineMD) it allocates withCtxMD
// and returns its array as the buffer for the section.
func (r *reflectMethod) newWithCtx(mdSize int) (cctx *callCtx, args, reply any, mdBuf []byte) {
	t := r.withCtx
	if inlineMD(mdSize) {
		t = r.withCtxMD
	}
	p := reflect.New(t).Elem()
	rp := p.Field(2).Addr()
	prepareReply(rp)
	if t == r.withCtxMD {
		mdBuf = p.Field(3).Bytes()[:0]
	}
	return p.Field(0).Addr().Interface().(*callCtx), p.Field(1).Addr().Interface(), rp.Interface(), mdBuf
}

// typeOfCallCtx is the type of a callCtx.
var typeOfCallCtx = reflect.TypeFor[callCtx]()

// structOf returns a struct type of the given field types (named F0,
// F1...), or nil when package reflect cannot build it.
func structOf(types ...reflect.Type) (t reflect.Type) {
	defer func() {
		if recover() != nil {
			t = nil
		}
	}()
	fields := make([]reflect.StructField, len(types))
	for i, ft := range types {
		fields[i] = reflect.StructField{Name: fmt.Sprintf("F%d", i), Type: ft}
	}
	return reflect.StructOf(fields)
}

func (r *reflectMethod) invoke(ctx context.Context, args, reply any) error {
	a, rp := reflect.ValueOf(args), reflect.ValueOf(reply)
	if a.Type() != r.argPtr || rp.Type() != r.replyPtr {
		return fleet.Errorf(fleet.Internal, "handler called with %T and %T, want %s and %s", args, reply, r.argPtr, r.replyPtr)
	}
	if r.argIsValue {
		a = a.Elem()
	}
	var buf [4]reflect.Value
	in := buf[:0]
	if r.rcvr.IsValid() {
		in = append(in, r.rcvr)
	}
	if r.hasCtx {
		// A Value of the parameter's own type, context.Context: Call then
		// checks assignability by identity, not by walking the method set
		// of the concrete context type (a tenth of a whole call's CPU).
		// The call's own context lends its slot for that, also when an
		// interceptor passed on a context derived from it (no
		// allocation); a context not derived from the call's, or a
		// second concurrent use of the slot, takes a variable of its own.
		cc, ok := ctx.(*callCtx)
		if !ok {
			cc, ok = ctx.Value(callCtxKey{}).(*callCtx)
		}
		if ok && cc.slotBusy.CompareAndSwap(false, true) {
			cc.slot = ctx
			defer cc.freeSlot()
			in = append(in, reflect.ValueOf(&cc.slot).Elem())
		} else {
			own := ctx
			in = append(in, reflect.ValueOf(&own).Elem())
		}
	}
	in = append(in, a, rp)
	out := r.fn.Call(in)
	if e := out[0].Interface(); e != nil {
		return e.(error)
	}
	return nil
}

func (r *reflectMethod) methodType(svc, name string) *methodType {
	m := &methodType{service: svc, name: name, newArgs: r.newArgs, newReply: r.newReply, invoke: r.invoke}
	if r.pair = structOf(r.argPtr.Elem(), r.replyPtr.Elem()); r.pair != nil {
		m.newPair = r.newPair
	}
	r.withCtx = structOf(typeOfCallCtx, r.argPtr.Elem(), r.replyPtr.Elem())
	r.withCtxMD = structOf(typeOfCallCtx, r.argPtr.Elem(), r.replyPtr.Elem(), typeOfMDArray)
	if r.withCtx != nil && r.withCtxMD != nil {
		m.newWithCtx = r.newWithCtx
	}
	return m
}

// checkSignature applies net/rpc's rules to the parameters of ft after the
// first skip ones (the receiver), plus Fleet's optional leading
// context.Context: (args A, reply *R) error or (ctx, args A, reply *R)
// error, where A is any exported or built-in type, by value or pointer, and
// R is any exported or built-in type. The error says why ft does not fit.
func checkSignature(ft reflect.Type, skip int) (r *reflectMethod, err error) {
	n := ft.NumIn() - skip
	switch {
	case ft.IsVariadic():
		return nil, errors.New("is variadic")
	case n == 3 && ft.In(skip) != typeOfContext:
		return nil, fmt.Errorf("first of 3 parameters is %s, want context.Context", ft.In(skip))
	case n != 2 && n != 3:
		return nil, fmt.Errorf("has %d parameters, want (args, *reply) or (context.Context, args, *reply)", n)
	}
	r = &reflectMethod{hasCtx: n == 3}
	if r.hasCtx {
		skip++
	}
	a, rp := ft.In(skip), ft.In(skip+1)
	switch {
	case !exportedOrBuiltin(a):
		return nil, fmt.Errorf("argument type %s is not exported", a)
	case rp.Kind() != reflect.Pointer:
		return nil, fmt.Errorf("reply type %s is not a pointer", rp)
	case !exportedOrBuiltin(rp):
		return nil, fmt.Errorf("reply type %s is not exported", rp)
	case ft.NumOut() != 1 || ft.Out(0) != typeOfError:
		return nil, errors.New("must return exactly one value, of type error")
	}
	r.argPtr, r.replyPtr = a, rp
	if a.Kind() != reflect.Pointer {
		r.argPtr, r.argIsValue = reflect.PointerTo(a), true
	}
	return r, nil
}

// exportedOrBuiltin reports whether t, after dereferencing pointers, is an
// exported named type or a type with no package (string, int, []T, map...).
func exportedOrBuiltin(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return token.IsExported(t.Name()) || t.PkgPath() == ""
}

// skipped is an exported method that was not registered, and why.
type skipped struct{ method, reason string }

// suitableMethods returns the methods of rt (whose value is rv) that fit,
// and the exported methods that do not.
func suitableMethods(name string, rv reflect.Value, rt reflect.Type) (map[string]*methodType, []skipped) {
	methods := map[string]*methodType{}
	var skips []skipped
	for i := 0; i < rt.NumMethod(); i++ {
		m := rt.Method(i)
		if !m.IsExported() {
			continue
		}
		r, err := checkSignature(m.Type, 1)
		if err != nil {
			skips = append(skips, skipped{m.Name, err.Error()})
			continue
		}
		r.fn, r.rcvr = m.Func, rv
		methods[m.Name] = r.methodType(name, m.Name)
	}
	return methods, skips
}

// newService builds the method table of rcvr under name, logging every
// exported method it skips. It fails when no method fits.
func newService(name string, rcvr any, log *slog.Logger) (*service, error) {
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
	methods, skips := suitableMethods(name, rv, rt)
	for _, sk := range skips {
		log.Warn("fleet server: method not registered", "service", name, "method", sk.method, "reason", sk.reason)
	}
	if len(methods) == 0 {
		msg := fmt.Sprintf("server: type %s has no exported methods of the form M(args A, reply *R) error or M(ctx context.Context, args A, reply *R) error", rt)
		if rt.Kind() != reflect.Pointer {
			if pm, _ := suitableMethods(name, reflect.New(rt), reflect.PointerTo(rt)); len(pm) > 0 {
				msg += " (hint: its methods have pointer receivers; register a pointer)"
			}
		}
		if len(skips) > 0 {
			why := make([]string, len(skips))
			for i, sk := range skips {
				why[i] = sk.method + ": " + sk.reason
			}
			msg += "; skipped " + strings.Join(why, "; ")
		}
		return nil, errors.New(msg)
	}
	return &service{name: name, methods: methods}, nil
}

// newFunction builds a method from a plain function.
func newFunction(svc, method string, fn any) (*methodType, error) {
	fv := reflect.ValueOf(fn)
	if fv.Kind() != reflect.Func || fv.IsNil() {
		return nil, fmt.Errorf("server: %s.%s: %T is not a function", svc, method, fn)
	}
	r, err := checkSignature(fv.Type(), 0)
	if err != nil {
		return nil, fmt.Errorf("server: %s.%s: function %s", svc, method, err)
	}
	r.fn = fv
	return r.methodType(svc, method), nil
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
