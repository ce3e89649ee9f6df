package fleet

import (
	"context"
	"errors"
	"fmt"
	"strconv"
)

// Code classifies an error. It travels on the wire in one byte (the status
// field of a response frame). The zero value, OK, means success.
type Code uint8

// The codes. Values 0–16 equal gRPC's codes of the same name.
const (
	OK                 Code = 0  // not an error
	Canceled           Code = 1  // the caller cancelled the call
	Unknown            Code = 2  // an error that carries no code, such as a handler's plain error
	InvalidArgument    Code = 3  // the request is malformed: undecodable arguments, a bad frame
	DeadlineExceeded   Code = 4  // the call's deadline passed before it completed
	NotFound           Code = 5  // unknown service or method
	AlreadyExists      Code = 6  // the entity already exists
	PermissionDenied   Code = 7  // the caller is known but not allowed
	ResourceExhausted  Code = 8  // a limit was hit: frame size, metadata, concurrency
	FailedPrecondition Code = 9  // the system is not in a state to run the call
	Aborted            Code = 10 // the call was aborted, typically by a conflict
	OutOfRange         Code = 11 // an argument is outside its valid range
	Unimplemented      Code = 12 // the operation is not implemented
	Internal           Code = 13 // an invariant broke, such as a panic in a handler
	Unavailable        Code = 14 // the server cannot be reached or refused the call unprocessed
	DataLoss           Code = 15 // unrecoverable data loss or corruption
	Unauthenticated    Code = 16 // the call lacks valid credentials
	// ShuttingDown: the server is draining and did not run the call; the
	// client may retry it on another server. A Fleet code; it maps to
	// gRPC's Unavailable.
	ShuttingDown Code = 17
)

var codeNames = [...]string{
	OK:                 "ok",
	Canceled:           "canceled",
	Unknown:            "unknown",
	InvalidArgument:    "invalid_argument",
	DeadlineExceeded:   "deadline_exceeded",
	NotFound:           "not_found",
	AlreadyExists:      "already_exists",
	PermissionDenied:   "permission_denied",
	ResourceExhausted:  "resource_exhausted",
	FailedPrecondition: "failed_precondition",
	Aborted:            "aborted",
	OutOfRange:         "out_of_range",
	Unimplemented:      "unimplemented",
	Internal:           "internal",
	Unavailable:        "unavailable",
	DataLoss:           "data_loss",
	Unauthenticated:    "unauthenticated",
	ShuttingDown:       "shutting_down",
}

// String returns the code's snake_case name, such as "not_found", or
// "code_N" for a value Fleet does not define.
func (c Code) String() string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return "code_" + strconv.Itoa(int(c))
}

// Error is Fleet's error: a Code, a message, and optionally the errors that
// caused it. A handler's own error reaches the caller as an *Error whose
// Message is the handler's message, unchanged.
//
// An *Error is immutable: its fields are unexported and read through Code,
// Message and Unwrap, so an *Error is safe to share between goroutines and
// to use as a package-level sentinel.
//
// errors.Is(err, target) holds when target is an *Error with the same code
// and either an empty message or the same message, so a sentinel such as
// NewError(NotFound, "") matches every NotFound error. errors.Is and
// errors.As also search the causes (see Errorf and WrapError).
type Error struct {
	code   Code
	msg    string
	causes []error
}

// NewError returns an *Error with the code and message and no cause.
func NewError(code Code, msg string) *Error { return &Error{code: code, msg: msg} }

// Errorf returns an *Error with the code and a message formatted as
// fmt.Errorf formats it. Every %w operand becomes a cause: errors.Is and
// errors.As find each of them, as with fmt.Errorf's own multi-%w errors.
func Errorf(code Code, format string, args ...any) *Error {
	err := fmt.Errorf(format, args...)
	e := &Error{code: code, msg: err.Error()}
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		e.causes = u.Unwrap()
	case interface{ Unwrap() error }:
		if c := u.Unwrap(); c != nil {
			e.causes = []error{c}
		}
	}
	return e
}

// WrapError returns an *Error with the code whose message is err's and whose
// cause is err. It returns nil for a nil err.
func WrapError(code Code, err error) *Error {
	if err == nil {
		return nil
	}
	return &Error{code: code, msg: err.Error(), causes: []error{err}}
}

// Code returns the error's code; Unknown for a nil *Error.
func (e *Error) Code() Code {
	if e == nil {
		return Unknown
	}
	return e.code
}

// Message returns the error's message without the code prefix; for a
// handler's error it is the handler's message, unchanged.
func (e *Error) Message() string {
	if e == nil {
		return ""
	}
	return e.msg
}

// Error formats the error as "code: message", such as
// "not_found: unknown service \"Foo\"", or the code alone when the
// message is empty.
func (e *Error) Error() string {
	if e.msg == "" {
		return e.code.String()
	}
	return e.code.String() + ": " + e.msg
}

// Unwrap returns the errors this one wraps (nil when none). The slice is
// the error's own and must not be modified; errors.Is and errors.As walk it.
func (e *Error) Unwrap() []error { return e.causes }

// Is reports whether target is an *Error with e's code and, when target's
// message is not empty, e's message.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok {
		return false
	}
	return t.code == e.code && (t.msg == "" || t.msg == e.msg)
}

// CodeOf returns the code of err: OK for nil; the Code of the first *Error
// in err's chain; Canceled or DeadlineExceeded for the context package's
// errors; Unknown otherwise.
func CodeOf(err error) Code {
	if err == nil {
		return OK
	}
	var fe *Error
	if errors.As(err, &fe) {
		return fe.code
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return DeadlineExceeded
	case errors.Is(err, context.Canceled):
		return Canceled
	}
	return Unknown
}

// FromContextError converts a context's error into the matching *Error
// (DeadlineExceeded or Canceled) that unwraps to it; other errors are
// returned as CodeOf classifies them. It returns nil for nil.
func FromContextError(err error) error {
	if err == nil {
		return nil
	}
	var fe *Error
	if errors.As(err, &fe) {
		return err
	}
	return WrapError(CodeOf(err), err)
}
