package gateway

import (
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
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
// answered 415 by refuseContentType, and a request a browser marks
// cross-site or same-site (Sec-Fetch-Site) or whose Origin is not the
// request's own host, answered 403. The gateway sends no CORS headers, so
// a browser's preflight for any other request fails (405). It reports
// whether the request may go on.
func (g *Gateway) browserCheck(w http.ResponseWriter, r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if ct == "" || err != nil || mt != "application/json" {
		refuseContentType(w, r, ct)
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

// acceptPostMethod is the Accept-Post value of a 415 on a method's path
// (/{service}/{method}): the content types the gateway serves there, with
// HTTP/JSON's application/json (also Connect unary JSON, with a
// Connect-Protocol-Version header) and the Connect, gRPC-Web and gRPC
// types of the codecs the Connect side registers (proto and JSON; gRPC
// over HTTP/2 only), sorted as connect-go sorts its own Accept-Post.
const acceptPostMethod = "application/connect+json, application/connect+proto, " +
	"application/grpc, application/grpc+json, application/grpc+proto, " +
	"application/grpc-web, application/grpc-web+json, application/grpc-web+proto, " +
	"application/grpc-web-text, application/grpc-web-text+json, application/grpc-web-text+proto, " +
	"application/json, application/proto"

// refuseContentType answers a POST whose content type is neither JSON nor
// an RPC protocol's (ct, as sent; empty when missing) as connect-go's
// handler answers one: 415 with an Accept-Post header (the W3C Linked
// Data Platform's header, in IANA's HTTP field registry) listing what the path accepts (application/json on the JSON-RPC paths
// / and /jsonrpc, acceptPostMethod elsewhere), and a text/plain body that
// says why. The answer is not application/json on purpose: a Connect
// client reads a JSON body on an error status as a Connect error (a
// string code), and Fleet's error body has a number there; on any other
// body, Connect, gRPC and gRPC-Web clients all take the code from the
// status (415: unknown), and curl shows the message.
func refuseContentType(w http.ResponseWriter, r *http.Request, ct string) {
	accept := acceptPostMethod
	what := "HTTP/JSON calls are application/json; Connect, gRPC-Web and gRPC calls use their protocols' content types"
	if r.URL.Path == "/" || r.URL.Path == "/jsonrpc" {
		accept = "application/json"
		what = "JSON-RPC 2.0 requests are application/json"
	}
	msg := fmt.Sprintf("content type %q not accepted: %s (see Accept-Post)\n", ct, what)
	h := w.Header()
	h.Set("Accept-Post", accept)
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(len(msg)))
	w.WriteHeader(http.StatusUnsupportedMediaType)
	_, _ = io.WriteString(w, msg)
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
