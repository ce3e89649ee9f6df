package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/fleetrpc/fleet"
)

// ErrQuotaExceeded is a sentinel: errors.Is matches it against any
// ResourceExhausted error whose message is "quota exceeded".
var ErrQuotaExceeded = fleet.NewError(fleet.ResourceExhausted, "quota exceeded")

func ExampleNewError() {
	err := fleet.NewError(fleet.NotFound, `unknown service "Foo"`)
	fmt.Println(err)
	fmt.Println(err.Code(), err.Message())
	// Output:
	// not_found: unknown service "Foo"
	// not_found unknown service "Foo"
}

func ExampleErrorf() {
	err := fleet.Errorf(fleet.Unavailable, "load %q: %w (after %w)", "cfg", fs.ErrNotExist, context.DeadlineExceeded)
	fmt.Println(err)
	fmt.Println(errors.Is(err, fs.ErrNotExist), errors.Is(err, context.DeadlineExceeded))
	fmt.Println(fleet.CodeOf(err))
	// Output:
	// unavailable: load "cfg": file does not exist (after context deadline exceeded)
	// true true
	// unavailable
}

func ExampleCodeOf() {
	wrapped := fmt.Errorf("calling Arith.Div: %w", ErrQuotaExceeded)
	fmt.Println(fleet.CodeOf(wrapped))
	fmt.Println(errors.Is(wrapped, ErrQuotaExceeded))
	fmt.Println(errors.Is(wrapped, fleet.NewError(fleet.ResourceExhausted, "")))
	fmt.Println(fleet.CodeOf(context.Canceled), fleet.CodeOf(nil))
	// Output:
	// resource_exhausted
	// true
	// true
	// canceled ok
}

func ExampleError_Is() {
	// A sentinel with an empty message matches every error of its code.
	notFound := fleet.NewError(fleet.NotFound, "")
	err := fleet.NewError(fleet.NotFound, `unknown method "Arith.Pow"`)
	fmt.Println(errors.Is(err, notFound))
	fmt.Println(errors.Is(err, fleet.NewError(fleet.NotFound, "something else")))
	// Output:
	// true
	// false
}

func ExampleWithOutgoingMetadata() {
	ctx := fleet.WithOutgoingMetadata(context.Background(), fleet.Metadata{"tenant": "acme"})
	ctx = fleet.WithOutgoingMetadata(ctx, fleet.Metadata{fleet.AuthKey: "secret"})
	md := fleet.OutgoingMetadata(ctx)
	fmt.Println(md["tenant"], md[fleet.AuthKey])
	// Output: acme secret
}
