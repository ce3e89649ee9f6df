package gateway

import (
	"errors"
	"strings"

	"connectrpc.com/connect/v2"
	"github.com/fleetrpc/fleet"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
)

// ErrorDetailer is implemented by an error that carries protobuf error
// details (the details of a google.rpc.Status). When a handler's error
// holds one in its chain (errors.As; wrap it with fleet.WrapError to give
// it a code), the gateway sends its details with the error: in
// grpc-status-details-bin over gRPC and gRPC-Web, in the error's
// "details" over Connect. Native Fleet clients, HTTP/JSON and JSON-RPC
// see the code and message only.
type ErrorDetailer interface {
	ErrorDetails() []*anypb.Any
}

// errorDetails returns the details in err's chain, nil when none.
func errorDetails(err error) []*anypb.Any {
	var d ErrorDetailer
	if errors.As(err, &d) {
		return d.ErrorDetails()
	}
	return nil
}

// withDetails adds err's details to a Connect error.
func withDetails(ce *connect.Error, err error) *connect.Error {
	for _, a := range errorDetails(err) {
		name := a.GetTypeUrl()
		if i := strings.LastIndexByte(name, '/'); i >= 0 {
			name = name[i+1:]
		}
		ce = ce.WithDetail(&connect.ErrorDetail{Type: name, Value: a.GetValue()})
	}
	return ce
}

// grpcStatus is the gRPC status of a Fleet error: its code mapped by
// GRPCCode, its message intact, its details if it carries any.
func grpcStatus(err error) error {
	code := GRPCCode(fleet.CodeOf(err))
	d := errorDetails(err)
	if len(d) == 0 {
		return status.Error(code, fleetMessage(err))
	}
	return status.FromProto(&spb.Status{Code: int32(code), Message: fleetMessage(err), Details: d}).Err()
}
