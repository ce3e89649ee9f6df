package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"

	"github.com/fleetrpc/fleet"
)

// streamBinder is implemented by *ServerStream[R], *ClientStream[A] and
// *BidiStream[A, R]: it lets reflective registration build a typed stream
// around the untyped one.
type streamBinder interface {
	bind(st Stream)
	kind() streamKind
	// msgTypes returns the message types the stream type names (nil for
	// one it does not name).
	msgTypes() (req, res reflect.Type)
}

type streamKind int

const (
	kindServer streamKind = iota + 1
	kindClient
	kindBidi
)

func (s *ServerStream[Res]) bind(st Stream)    { s.st = st }
func (*ServerStream[Res]) kind() streamKind    { return kindServer }
func (s *ClientStream[Req]) bind(st Stream)    { s.st = st }
func (*ClientStream[Req]) kind() streamKind    { return kindClient }
func (s *BidiStream[Req, Res]) bind(st Stream) { s.st = st }
func (*BidiStream[Req, Res]) kind() streamKind { return kindBidi }

func (*ServerStream[Res]) msgTypes() (req, res reflect.Type) { return nil, reflect.TypeFor[Res]() }
func (*ClientStream[Req]) msgTypes() (req, res reflect.Type) { return reflect.TypeFor[Req](), nil }
func (*BidiStream[Req, Res]) msgTypes() (req, res reflect.Type) {
	return reflect.TypeFor[Req](), reflect.TypeFor[Res]()
}

var (
	binderType = reflect.TypeFor[streamBinder]()
	ctxType    = reflect.TypeFor[context.Context]()
	errType    = reflect.TypeFor[error]()
)

// RegisterStreams serves the streaming methods of rcvr under name (the
// name of rcvr's type when empty). A method is served when it has one of
// the forms
//
//	func (t *T) M(ctx context.Context, req *A, st *server.ServerStream[R]) error
//	func (t *T) M(ctx context.Context, st *server.ClientStream[A]) (*R, error)
//	func (t *T) M(ctx context.Context, st *server.BidiStream[A, R]) error
//
// with the semantics of HandleServerStream, HandleClientStream and
// HandleBidiStream; other methods are skipped (Register serves unary
// ones). The method is looked up by reflection once, here; each stream
// then costs one reflective call. It fails when no method qualifies or a
// name is taken.
func (s *Server) RegisterStreams(name string, rcvr any) error {
	rv := reflect.ValueOf(rcvr)
	rt := rv.Type()
	if name == "" {
		name = reflect.Indirect(rv).Type().Name()
	}
	if name == "" {
		return errors.New("server: RegisterStreams of an unnamed type needs a name")
	}
	n := 0
	for i := 0; i < rt.NumMethod(); i++ {
		m := rt.Method(i)
		h := streamMethod(rv.Method(i))
		if h == nil {
			continue
		}
		if err := s.handleStream(name, m.Name, h); err != nil {
			return err
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("server: type %s has no streaming method", rt)
	}
	return nil
}

// streamMethod returns the handler for a bound method of a streaming
// form, or nil.
func streamMethod(fn reflect.Value) *streamHandler {
	ft := fn.Type()
	if ft.NumIn() < 2 || ft.In(0) != ctxType {
		return nil
	}
	last := ft.In(ft.NumIn() - 1)
	if last.Kind() != reflect.Pointer || !last.Implements(binderType) {
		return nil
	}
	newStream := func(st Stream) reflect.Value {
		v := reflect.New(last.Elem())
		v.Interface().(streamBinder).bind(st)
		return v
	}
	binder := reflect.New(last.Elem()).Interface().(streamBinder)
	kind := binder.kind()
	reqT, resT := binder.msgTypes()
	ctxOf := func(ctx context.Context) reflect.Value { return reflect.ValueOf(&ctx).Elem() }
	errOf := func(v reflect.Value) error {
		if v.IsNil() {
			return nil
		}
		return v.Interface().(error)
	}
	switch {
	case kind == kindServer && ft.NumIn() == 3 && ft.In(1).Kind() == reflect.Pointer && ft.NumOut() == 1 && ft.Out(0) == errType:
		argType := ft.In(1).Elem()
		return &streamHandler{run: func(ctx context.Context, st Stream) error {
			req := reflect.New(argType)
			if err := st.Receive(req.Interface()); err != nil {
				if err == io.EOF {
					return fleet.NewError(fleet.InvalidArgument, "server stream opened without a request message")
				}
				return err
			}
			return errOf(fn.Call([]reflect.Value{ctxOf(ctx), req, newStream(st)})[0])
		}, kind: kind, req: argType, res: resT}
	case kind == kindClient && ft.NumIn() == 2 && ft.NumOut() == 2 && ft.Out(0).Kind() == reflect.Pointer && ft.Out(1) == errType:
		resType := ft.Out(0).Elem()
		return &streamHandler{run: func(ctx context.Context, st Stream) error {
			out := fn.Call([]reflect.Value{ctxOf(ctx), newStream(st)})
			if err := errOf(out[1]); err != nil {
				return err
			}
			res := out[0]
			if res.IsNil() {
				res = reflect.New(resType)
			}
			return st.Send(res.Interface())
		}, kind: kind, req: reqT, res: resType}
	case kind == kindBidi && ft.NumIn() == 2 && ft.NumOut() == 1 && ft.Out(0) == errType:
		return &streamHandler{run: func(ctx context.Context, st Stream) error {
			return errOf(fn.Call([]reflect.Value{ctxOf(ctx), newStream(st)})[0])
		}, kind: kind, req: reqT, res: resT}
	}
	return nil
}
