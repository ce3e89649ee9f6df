package gateway

import (
	"net/http"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// httpLimits are the HTTP/1.1 and HTTP/2 limits of the gateway's HTTP
// side and of its gRPC transport (see docs/security.md for which server
// enforces which).
type httpLimits struct {
	maxStreams   uint32
	maxResets    int
	frameTimeout time.Duration
	bodyTimeout  time.Duration
	writeTimeout time.Duration
	// looseJSON turns off the field check of HTTP/JSON arguments
	// (WithLooseJSON, httpjson.go).
	looseJSON bool
}

func defaultHTTPLimits() httpLimits {
	return httpLimits{
		maxStreams:   100,
		maxResets:    100,
		frameTimeout: 10 * time.Second,
		bodyTimeout:  20 * time.Second,
		writeTimeout: 30 * time.Second,
	}
}

// WithMaxConcurrentStreams sets SETTINGS_MAX_CONCURRENT_STREAMS on every
// HTTP/2 connection (grpc-go's transport and net/http's HTTP/2 server):
// streams over it are refused, and no more than n handlers run per
// connection, a reset stream's handler counting until it returns (its
// context is cancelled at the reset). Default 100, as grpc-go and net/http
// advise; n == 0 keeps the default.
func WithMaxConcurrentStreams(n uint32) Option {
	return optionFunc(func(o *options) {
		if n > 0 {
			o.limits.maxStreams = n
		}
	})
}

// WithMaxResetRate caps the RST_STREAM frames a client may send on one
// HTTP/2 connection accepted by Serve (h2c served by grpc-go's transport
// or, with WithH2CToHTTP, by net/http; TLS with ALPN h2): n per
// second sustained, in bursts of up to 10n (a token bucket, full when the
// connection opens). A client past it gets GOAWAY with ENHANCE_YOUR_CALM
// and the connection is closed (rapid reset, CVE-2023-44487). A
// Handler mounted on a server of your own is not covered (net/http's own
// rule applies there; see docs/security.md). Default 100 per second,
// bursts of 1000; n < 0 removes the cap.
func WithMaxResetRate(n int) Option {
	return optionFunc(func(o *options) {
		if n != 0 {
			o.limits.maxResets = max(n, 0)
		}
	})
}

// WithFrameReadTimeout bounds how long an HTTP/2 client may take to finish
// a frame it began, or a header block (HEADERS, then CONTINUATION until
// END_HEADERS): a connection that stalls longer is closed. It also bounds
// the HTTP/2 handshake of grpc-go's transport, and on net/http's HTTP/2
// server it is the ping health check (a silent connection is pinged after
// d and closed when the ping is not answered within d; a client cannot
// answer in the middle of a header block). Default 10 s.
func WithFrameReadTimeout(d time.Duration) Option {
	return optionFunc(func(o *options) {
		if d > 0 {
			o.limits.frameTimeout = d
		}
	})
}

// WithReadHeaderTimeout bounds the time to read an HTTP/1.1 request's
// headers (net/http's ReadHeaderTimeout). Default 10 s.
func WithReadHeaderTimeout(d time.Duration) Option {
	return optionFunc(func(o *options) {
		if d > 0 {
			o.headerTimeout = d
		}
	})
}

// WithBodyTimeout bounds the time to read the whole body of an HTTP/JSON
// or JSON-RPC request, counted from the end of its headers, over HTTP/1.1
// and HTTP/2: a slower body fails the request with 400 and, on HTTP/1.1,
// closes the connection. gRPC requests are not bounded by it (a stream
// may last as long as the call). Default 20 s.
func WithBodyTimeout(d time.Duration) Option {
	return optionFunc(func(o *options) {
		if d > 0 {
			o.limits.bodyTimeout = d
		}
	})
}

// WithWriteTimeout bounds the time to write an HTTP/JSON or JSON-RPC
// response, counted from when the handler's reply is ready (a long call
// is not cut by it). Default 30 s.
func WithWriteTimeout(d time.Duration) Option {
	return optionFunc(func(o *options) {
		if d > 0 {
			o.limits.writeTimeout = d
		}
	})
}

// WithIdleTimeout closes an HTTP/1.1 keep-alive connection or an HTTP/2
// connection with no open stream after d (grpc-go's transport sends
// GOAWAY first, so gRPC clients reconnect without failing a call).
// Default 2 minutes.
func WithIdleTimeout(d time.Duration) Option {
	return optionFunc(func(o *options) {
		if d > 0 {
			o.idleTimeout = d
		}
	})
}

// WithMaxHeaderBytes bounds a request's header list: HTTP/1.1 headers
// (net/http's MaxHeaderBytes) and the decoded HTTP/2 header list across
// HEADERS and CONTINUATION frames (SETTINGS_MAX_HEADER_LIST_SIZE, enforced
// by golang.org/x/net/http2's framer as the frames arrive). Default 64 KiB.
func WithMaxHeaderBytes(n int) Option {
	return optionFunc(func(o *options) {
		if n > 0 {
			o.maxHeaderBytes = n
		}
	})
}

// grpcLimitOptions are the gRPC transport's HTTP/2 limits.
func (g *Gateway) grpcLimitOptions() []grpc.ServerOption {
	l := g.opts.limits
	return []grpc.ServerOption{
		grpc.MaxConcurrentStreams(l.maxStreams),
		grpc.MaxHeaderListSize(uint32(g.opts.maxHeaderBytes)),
		grpc.ConnectionTimeout(l.frameTimeout),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: g.opts.idleTimeout}),
		grpc.ChainUnaryInterceptor(g.introspectionUnary),
		grpc.ChainStreamInterceptor(g.introspectionStream),
		grpc.InTapHandle(grpcTap),
	}
}

// http2Config is net/http's HTTP/2 configuration.
func (g *Gateway) http2Config() *http.HTTP2Config {
	l := g.opts.limits
	return &http.HTTP2Config{
		MaxConcurrentStreams: int(l.maxStreams),
		SendPingTimeout:      l.frameTimeout,
		PingTimeout:          l.frameTimeout,
		WriteByteTimeout:     l.frameTimeout,
	}
}

// deadlineWriter sets the write deadline when the response starts.
type deadlineWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	started bool
}

func (w *deadlineWriter) start() {
	if !w.started {
		w.started = true
		_ = w.rc.SetWriteDeadline(time.Now().Add(w.timeout))
	}
}

func (w *deadlineWriter) WriteHeader(code int) { w.start(); w.ResponseWriter.WriteHeader(code) }

func (w *deadlineWriter) Write(b []byte) (int, error) { w.start(); return w.ResponseWriter.Write(b) }

func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
