package server

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// HandleUnary serves fn as service.method, for a function that returns
// its reply, as gRPC-style service interfaces and the code protoc-gen-fleet
// generates do: fn(ctx, req) returns a *R (nil for the zero R) or an
// error. Registration, the pipeline and what interceptors see are those of
// Handle: interceptors get the *R the server allocated, which holds fn's
// reply once fn has returned.
//
// Moving the returned reply into the server's *R costs no deep copy: when
// *R is a protobuf message, its populated fields are set on the server's
// message through protoreflect (message, list and map fields are shared,
// not copied, so fn must not change what it returned); any other R is
// assigned. Nothing else differs from Handle, including the errors it
// returns. It is safe for concurrent use; register before serving.
func HandleUnary[A, R any](s *Server, service, method string, fn func(ctx context.Context, req *A) (*R, error)) error {
	if fn == nil {
		return fmt.Errorf("server: HandleUnary %s.%s: nil function", service, method)
	}
	move := func(dst, src *R) { *dst = *src }
	if _, ok := any(new(R)).(proto.Message); ok {
		move = func(dst, src *R) { moveProto(any(dst).(proto.Message), any(src).(proto.Message)) }
	}
	return Handle(s, service, method, func(ctx context.Context, req *A, reply *R) error {
		res, err := fn(ctx, req)
		if err != nil || res == nil || res == reply {
			return err
		}
		move(reply, res)
		return nil
	})
}

// moveProto sets dst's fields (dst is empty) to src's populated fields and
// unknown bytes, sharing their values: a shallow copy through protoreflect,
// as protobuf messages must not be copied by value.
func moveProto(dst, src proto.Message) {
	d, s := dst.ProtoReflect(), src.ProtoReflect()
	if !s.IsValid() {
		return
	}
	s.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		d.Set(fd, v)
		return true
	})
	if u := s.GetUnknown(); len(u) > 0 {
		d.SetUnknown(u)
	}
}
