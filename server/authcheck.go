package server

import (
	"context"

	"github.com/fleetrpc/fleet"
)

// Authenticate runs the server's auth function (WithAuth) on the token in
// md (its fleet.AuthKey entry) for a call of service and method, as a native
// call's token is checked, for front ends that serve something other than
// a registered method: the gateway's reflection and health services, and
// its decision to serve fleet.Admin over HTTP. configured is false when
// the server has no auth function (err is then nil). A refusal is a
// *fleet.Error, Unauthenticated unless the auth function chose a code.
// It is safe for concurrent use.
func (s *Server) Authenticate(ctx context.Context, service, method string, md fleet.Metadata) (configured bool, err error) {
	if s.opts.auth == nil {
		return false, nil
	}
	ci := fleet.CallInfo{Service: service, Method: method}
	ci.SetMetadata(md)
	return true, s.authorize(ctx, &ci)
}
