package main

import (
	"errors"
	"fmt"

	"github.com/fleetrpc/fleet"
)

// Exit statuses of fleet call, list and describe (docs/cli.md):
//
//	0       success
//	1       any other failure (the registry could not be opened, ...)
//	2       bad command line or input: unknown flag, wrong number of
//	        arguments, malformed TARGET or Service.Method, malformed JSON,
//	        unknown or missing fields (without --loose), an unreadable -d
//	        file
//	64+N    the call failed with Fleet code N, e.g. 66 unknown (a
//	        handler's plain error), 67 invalid_argument, 68
//	        deadline_exceeded, 69 not_found, 78 unavailable, 80
//	        unauthenticated, 81 shutting_down
//
// 64 + code follows grpcurl, which exits with 64 + the gRPC status code;
// Fleet codes 0-16 equal gRPC's.
const (
	exitFailure   = 1
	exitUsage     = 2
	exitCodeShift = 64
)

// usageError is a bad command line or input: exit status 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return &usageError{fmt.Errorf(format, args...)} }

// callError is a failed call (or reflection call): exit status 64 + code.
type callError struct {
	what string // "Arith.Add", "list", ...
	err  error
}

// Error prints the code by name and number and the server's message:
// `Arith.Div: unknown (2): divide by zero`.
func (e *callError) Error() string {
	code := fleet.CodeOf(e.err)
	msg := e.err.Error()
	var fe *fleet.Error
	if errors.As(e.err, &fe) {
		msg = fe.Message()
		// Wrappers (retry budget, ...) add context around the *Error.
		if outer := e.err.Error(); outer != fe.Error() {
			msg = outer
		}
	}
	return fmt.Sprintf("%s: %s (%d): %s", e.what, code, code, msg)
}

func (e *callError) Unwrap() error { return e.err }

// exitStatus maps an error a command returned to the process's exit
// status. Errors of the existing commands (demo, bench) keep status 1.
func exitStatus(err error) int {
	if err == nil {
		return 0
	}
	var ue *usageError
	if errors.As(err, &ue) {
		return exitUsage
	}
	var ce *callError
	if errors.As(err, &ce) {
		if c := fleet.CodeOf(ce.err); c != fleet.OK {
			return exitCodeShift + int(c)
		}
	}
	return exitFailure
}
