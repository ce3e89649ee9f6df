package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"testing"

	"github.com/fleetrpc/fleet"
)

func TestCodeString(t *testing.T) {
	tests := []struct {
		code fleet.Code
		want string
	}{
		{fleet.OK, "ok"},
		{fleet.NotFound, "not_found"},
		{fleet.Unauthenticated, "unauthenticated"},
		{fleet.ShuttingDown, "shutting_down"},
		{fleet.Code(200), "code_200"},
	}
	for _, tt := range tests {
		if got := tt.code.String(); got != tt.want {
			t.Errorf("Code(%d).String() = %q, want %q", tt.code, got, tt.want)
		}
	}
}

func TestErrorAccessors(t *testing.T) {
	tests := []struct {
		name    string
		err     *fleet.Error
		code    fleet.Code
		msg     string
		text    string
		nCauses int
	}{
		{"new", fleet.NewError(fleet.NotFound, "no such service"), fleet.NotFound, "no such service", "not_found: no such service", 0},
		{"empty message", fleet.NewError(fleet.Internal, ""), fleet.Internal, "", "internal", 0},
		{"errorf no wrap", fleet.Errorf(fleet.InvalidArgument, "bad %d", 7), fleet.InvalidArgument, "bad 7", "invalid_argument: bad 7", 0},
		{"errorf one wrap", fleet.Errorf(fleet.Unavailable, "dial: %w", io.EOF), fleet.Unavailable, "dial: EOF", "unavailable: dial: EOF", 1},
		{"errorf two wraps", fleet.Errorf(fleet.Aborted, "%w and %w", io.EOF, fs.ErrNotExist), fleet.Aborted, "EOF and file does not exist", "aborted: EOF and file does not exist", 2},
		{"wrap", fleet.WrapError(fleet.DataLoss, io.ErrUnexpectedEOF), fleet.DataLoss, "unexpected EOF", "data_loss: unexpected EOF", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Code(); got != tt.code {
				t.Errorf("Code() = %v, want %v", got, tt.code)
			}
			if got := tt.err.Message(); got != tt.msg {
				t.Errorf("Message() = %q, want %q", got, tt.msg)
			}
			if got := tt.err.Error(); got != tt.text {
				t.Errorf("Error() = %q, want %q", got, tt.text)
			}
			if got := len(tt.err.Unwrap()); got != tt.nCauses {
				t.Errorf("len(Unwrap()) = %d, want %d", got, tt.nCauses)
			}
		})
	}
}

func TestErrorfKeepsEveryCause(t *testing.T) {
	pathErr := &fs.PathError{Op: "open", Path: "/x", Err: fs.ErrNotExist}
	err := fleet.Errorf(fleet.Unavailable, "first %w, second %w, third %w", io.EOF, pathErr, context.Canceled)
	for _, target := range []error{io.EOF, fs.ErrNotExist, context.Canceled, fleet.NewError(fleet.Unavailable, "")} {
		if !errors.Is(err, target) {
			t.Errorf("errors.Is(err, %v) = false, want true", target)
		}
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		t.Error("errors.Is(err, io.ErrUnexpectedEOF) = true, want false")
	}
	var pe *fs.PathError
	if !errors.As(err, &pe) || pe.Path != "/x" {
		t.Errorf("errors.As(err, *fs.PathError) = %v, %v", pe, err)
	}
	// Wrapped once more by the caller, the causes are still found.
	outer := fmt.Errorf("call: %w", err)
	if !errors.Is(outer, io.EOF) || !errors.Is(outer, context.Canceled) || fleet.CodeOf(outer) != fleet.Unavailable {
		t.Errorf("causes lost through an outer wrap: %v", outer)
	}
}

func TestErrorIs(t *testing.T) {
	err := fleet.NewError(fleet.PermissionDenied, "not you")
	tests := []struct {
		target error
		want   bool
	}{
		{fleet.NewError(fleet.PermissionDenied, ""), true},
		{fleet.NewError(fleet.PermissionDenied, "not you"), true},
		{fleet.NewError(fleet.PermissionDenied, "someone else"), false},
		{fleet.NewError(fleet.NotFound, ""), false},
		{io.EOF, false},
	}
	for _, tt := range tests {
		if got := errors.Is(err, tt.target); got != tt.want {
			t.Errorf("errors.Is(%v, %v) = %v, want %v", err, tt.target, got, tt.want)
		}
	}
}

func TestCodeOf(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want fleet.Code
	}{
		{"nil", nil, fleet.OK},
		{"fleet error", fleet.NewError(fleet.NotFound, "x"), fleet.NotFound},
		{"wrapped fleet error", fmt.Errorf("outer: %w", fleet.NewError(fleet.Aborted, "x")), fleet.Aborted},
		{"deadline", context.DeadlineExceeded, fleet.DeadlineExceeded},
		{"wrapped deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), fleet.DeadlineExceeded},
		{"canceled", context.Canceled, fleet.Canceled},
		{"plain", io.EOF, fleet.Unknown},
		{"os error", os.ErrClosed, fleet.Unknown},
	}
	for _, tt := range tests {
		if got := fleet.CodeOf(tt.err); got != tt.want {
			t.Errorf("%s: CodeOf(%v) = %v, want %v", tt.name, tt.err, got, tt.want)
		}
	}
}

func TestFromContextError(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want fleet.Code
	}{
		{"deadline", context.DeadlineExceeded, fleet.DeadlineExceeded},
		{"canceled", context.Canceled, fleet.Canceled},
		{"fleet error kept", fleet.NewError(fleet.Internal, "x"), fleet.Internal},
		{"plain", io.EOF, fleet.Unknown},
	}
	for _, tt := range tests {
		got := fleet.FromContextError(tt.err)
		if fleet.CodeOf(got) != tt.want || !errors.Is(got, tt.err) {
			t.Errorf("%s: FromContextError(%v) = %v, want code %v wrapping the input", tt.name, tt.err, got, tt.want)
		}
	}
	if fleet.FromContextError(nil) != nil {
		t.Error("FromContextError(nil) != nil")
	}
	if fleet.WrapError(fleet.Internal, nil) != nil {
		t.Error("WrapError(code, nil) != nil")
	}
}
