package gateway

import (
	"errors"
	"reflect"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// GoTypeDescriptor returns the protobuf message the gateway maps the Go
// type t (the A of a method taking *A, not itself a protobuf message) to
// when it serves the method over gRPC: its fields, numbers and the file
// that declares it (fleet/gotypes/<full name>.proto, package
// fleet.gotypes[.<go package>]), as docs/gateway.md ("Go types over
// gRPC") states the mapping. The message is built on first use and cached
// for the process; the same Go type always gets the same message. It
// fails for a protobuf message type and for types the mapping does not
// cover (channels, functions, interfaces, recursive types, ...). It is
// safe for concurrent use, and it is what reflection.Config.GoTypes takes
// so that `fleet describe --proto` writes the .proto the gateway serves.
func GoTypeDescriptor(t reflect.Type) (protoreflect.MessageDescriptor, error) {
	if t == nil {
		return nil, errors.New("gateway: nil type")
	}
	if isProto(t) {
		return nil, errors.New("gateway: " + t.String() + " is a protobuf message: use its own descriptor")
	}
	m, err := goMessageOf(t)
	if err != nil {
		return nil, err
	}
	return m.md, nil
}
