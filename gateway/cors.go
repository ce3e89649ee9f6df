package gateway

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	connectcors "connectrpc.com/cors"
	"github.com/rs/cors"
)

// CORS is the cross-origin policy of the Connect and gRPC-Web side, for
// pages served from other origins (WithCORS). HTTP/JSON and JSON-RPC 2.0
// stay same-origin whatever it says.
type CORS struct {
	// AllowedOrigins are the origins whose pages may call: exact
	// origins ("https://app.example.com"), one "*" wildcard inside an
	// origin ("https://*.example.com"), or "*" for every origin.
	// Required: a CORS with no origin allows none.
	AllowedOrigins []string
	// AllowedHeaders are request headers a page may send beyond those of
	// the protocols (Content-Type, Connect-Protocol-Version,
	// Connect-Timeout-Ms, Grpc-Timeout, X-Grpc-Web, X-User-Agent) and
	// Authorization, which are always allowed: the metadata keys the
	// page sets. Default none.
	AllowedHeaders []string
	// ExposedHeaders are response headers a page may read beyond the
	// protocols' (Grpc-Status, Grpc-Message, Grpc-Status-Details-Bin):
	// the response metadata keys it reads. Default none.
	ExposedHeaders []string
	// AllowCredentials lets pages send cookies and HTTP authentication
	// (fetch's credentials: "include"); not with "*" origins. Default
	// false.
	AllowCredentials bool
	// MaxAge is how long a browser may cache a preflight answer, in
	// whole seconds. Default (0): 2 hours.
	MaxAge time.Duration
}

// WithCORS answers browsers' CORS preflight requests and adds the CORS
// response headers for the Connect and gRPC-Web requests of the origins
// c allows, so pages on those origins can call the gateway with
// connect-es or grpc-web. Requests from other origins are refused with
// PermissionDenied before anything runs. Default: no CORS: a request
// whose Origin is not the gateway's own host is refused, and preflights
// are answered 405.
func WithCORS(c CORS) Option {
	return optionFunc(func(o *options) { o.cors = &c })
}

// corsPolicy is a CORS made into rs/cors's handler, with the header lists
// of connectrpc.com/cors.
type corsPolicy struct{ c *cors.Cors }

func newCORSPolicy(c *CORS) *corsPolicy {
	if c == nil {
		return nil
	}
	maxAge := int(c.MaxAge / time.Second)
	if maxAge <= 0 {
		maxAge = 7200
	}
	return &corsPolicy{c: cors.New(cors.Options{
		AllowedOrigins:   slices.Clone(c.AllowedOrigins),
		AllowedMethods:   connectcors.AllowedMethods(),
		AllowedHeaders:   append(append(connectcors.AllowedHeaders(), "Authorization"), c.AllowedHeaders...),
		ExposedHeaders:   append(connectcors.ExposedHeaders(), c.ExposedHeaders...),
		AllowCredentials: c.AllowCredentials,
		MaxAge:           maxAge,
	})}
}

// preflight answers an OPTIONS request with Access-Control-Request-Method:
// 204 with the CORS headers for an allowed origin, 204 without them (the
// browser then refuses) for another.
func (p *corsPolicy) preflight(w http.ResponseWriter, r *http.Request) { p.c.HandlerFunc(w, r) }

// addHeaders sets the CORS headers of an actual request.
func (p *corsPolicy) addHeaders(w http.ResponseWriter, r *http.Request) { p.c.HandlerFunc(w, r) }

// isPreflight reports whether r is a CORS preflight request.
func isPreflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Origin") != "" && r.Header.Get("Access-Control-Request-Method") != ""
}

// originAllowed reports whether a Connect or gRPC-Web request may run: a
// request without Origin that no browser marks cross-site or same-site
// (Sec-Fetch-Site), one whose Origin is the request's own host, or one
// from an origin the CORS policy allows.
func (g *Gateway) originAllowed(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		switch r.Header.Get("Sec-Fetch-Site") {
		case "", "same-origin", "none":
			return true
		}
		return false
	}
	if u, err := url.Parse(o); err == nil && strings.EqualFold(u.Host, r.Host) {
		return true
	}
	return g.cors != nil && g.cors.c.OriginAllowed(r)
}
