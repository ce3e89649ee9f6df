package gateway

import (
	"context"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/server/admin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// WithOpenLiveness leaves grpc.health.v1 Check for the whole server (the
// empty service name) open to callers without a token when the server has
// an auth function, so load balancers and orchestrators can probe it; per
// service health and reflection always need the token then. Default true;
// false puts the liveness answer under auth too.
func WithOpenLiveness(on bool) Option {
	return optionFunc(func(o *options) { o.closedLiveness = !on })
}

// browserCheck refuses, before anything else runs, the requests a web
// page could make to the HTTP/JSON and JSON-RPC routes: a Content-Type
// other than application/json (text/plain, the form types and a missing
// one are what a page may send cross-origin without a CORS preflight),
// answered 415, and a request a browser marks cross-site or same-site
// (Sec-Fetch-Site) or whose Origin is not the request's own host,
// answered 403. The gateway sends no CORS headers, so a browser's
// preflight for any other request fails (405). It reports whether the
// request may go on.
func (g *Gateway) browserCheck(w http.ResponseWriter, r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if ct == "" || err != nil || mt != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, fleet.Errorf(fleet.InvalidArgument, "content type %q not accepted: requests are application/json", ct))
		return false
	}
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		writeError(w, http.StatusForbidden, fleet.Errorf(fleet.PermissionDenied, "cross-site request refused"))
		return false
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || !strings.EqualFold(u.Host, r.Host) {
			writeError(w, http.StatusForbidden, fleet.Errorf(fleet.PermissionDenied, "cross-origin request refused"))
			return false
		}
	}
	return true
}

// hiddenOverHTTP reports whether service is kept off the HTTP/JSON and
// JSON-RPC routes: fleet.Admin changes where traffic goes, so it is served
// there only by a server with an auth function.
func (g *Gateway) hiddenOverHTTP(service string) bool {
	return service == admin.Service && !g.authOn
}

// introspection reports whether a gRPC method is one of the gateway's own
// services (reflection, health), which are not Fleet methods and so do
// not pass the server's auth function on their own.
func introspection(fullMethod string) bool {
	return strings.HasPrefix(fullMethod, "/grpc.reflection.") || strings.HasPrefix(fullMethod, "/grpc.health.v1.Health/")
}

// checkIntrospection runs the server's auth function for a reflection or
// health call; nil when the server has none.
func (g *Gateway) checkIntrospection(ctx context.Context, fullMethod string, req any) error {
	if !g.authOn || !introspection(fullMethod) {
		return nil
	}
	if !g.opts.closedLiveness && fullMethod == "/grpc.health.v1.Health/Check" {
		if r, ok := req.(interface{ GetService() string }); ok && r.GetService() == "" {
			return nil
		}
	}
	svc, method, _ := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/")
	if _, err := g.srv.Authenticate(ctx, svc, method, grpcMetadata(ctx)); err != nil {
		return status.Error(GRPCCode(fleet.CodeOf(err)), err.Error())
	}
	return nil
}

// introspectionUnary puts reflection and health under the server's auth.
func (g *Gateway) introspectionUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if err := g.checkIntrospection(ctx, info.FullMethod, req); err != nil {
		return nil, err
	}
	return h(ctx, req)
}

// introspectionStream is introspectionUnary for streams (reflection is a
// bidi stream; Health/Watch a server stream).
func (g *Gateway) introspectionStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if introspection(info.FullMethod) {
		if err := g.checkIntrospection(ss.Context(), info.FullMethod, nil); err != nil {
			return err
		}
	}
	return h(srv, ss)
}
