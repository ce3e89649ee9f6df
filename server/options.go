package server

import (
	"context"
	"crypto/tls"
	"log/slog"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/protocol"
)

// Option configures a Server. Options are applied in order by New.
type Option interface{ apply(*options) }

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// AuthFunc checks a call's credentials before its handler runs. token is
// the request metadata's fleet.AuthKey value ("" when absent). A non-nil
// error rejects the call; it reaches the caller with code Unauthenticated
// unless it is a *fleet.Error carrying another code.
type AuthFunc func(ctx context.Context, info *fleet.CallInfo, token string) error

type options struct {
	limits       protocol.Limits
	maxPerConn   int
	stream       streamOptions
	maxHeldBytes int64
	workers      int
	readBuf      int
	idleTimeout  time.Duration
	writeTimeout time.Duration
	compressMin  int
	tls          *tls.Config
	auth         AuthFunc
	interceptors []Interceptor // WithInterceptor (interceptor.go)
	plugins      []any
	logger       *slog.Logger
	admission    // options_admission.go
}

func defaultOptions() options {
	return options{
		maxPerConn:   10000,
		maxHeldBytes: 64 << 20,
		readBuf:      32 << 10,
		idleTimeout:  2 * time.Minute,
		writeTimeout: 30 * time.Second,
		compressMin:  1024,
		logger:       slog.Default(),
		admission:    defaultAdmission(),
	}
}

// WithLimits sets the protocol limits (frame size, decompressed size,
// metadata). Default: protocol.Limits{} with its defaults (4 MiB frames).
func WithLimits(l protocol.Limits) Option { return optionFunc(func(o *options) { o.limits = l }) }

// WithMaxConcurrentPerConn caps the handlers running at once for one
// connection; a call over the cap is answered ResourceExhausted without
// running, and a oneway send over the cap (which cannot be answered) makes
// the server stop reading the connection until a handler finishes, so it
// is never dropped. Default 10,000; 0 or less means no cap.
func WithMaxConcurrentPerConn(n int) Option {
	return optionFunc(func(o *options) { o.maxPerConn = n })
}

// WithMaxPendingBytesPerConn bounds the request bytes that running
// handlers of one connection hold, each request counted at its frame buffer
// plus the most its payload may decompress to (see WithMaxPendingBytes):
// when a request would not fit, the server stops reading that connection
// until handlers finish (TCP flow control then slows the client), so a
// flood of oneway sends or compressed bombs cannot exhaust memory. A single
// request larger than the budget runs when nothing else of the connection
// is held. Default 64 MiB.
func WithMaxPendingBytesPerConn(n int64) Option {
	return optionFunc(func(o *options) { o.maxHeldBytes = max(n, 1) })
}

// WithWorkerPool runs handlers on a pool of n goroutines shared by all
// connections instead of one goroutine per request. When all workers are
// busy, a connection waits to hand over its next request. Default 0: one
// goroutine per request (reusing idle ones, see the package doc).
func WithWorkerPool(n int) Option { return optionFunc(func(o *options) { o.workers = n }) }

// WithIdleTimeout closes a connection on which nothing (no request, no
// heartbeat) arrives for d; the connection is closed somewhere between d/2
// and d after the last frame. It is also the read timeout: the deadline is
// refreshed only between frames, so one frame must arrive whole within it
// (a peer trickling a frame byte by byte is cut off). Default 2 minutes;
// 0 disables it.
func WithIdleTimeout(d time.Duration) Option {
	return optionFunc(func(o *options) { o.idleTimeout = d })
}

// WithWriteTimeout bounds each write to a connection; a peer that does not
// read for d has its connection closed. Default 30 s; 0 disables it.
func WithWriteTimeout(d time.Duration) Option {
	return optionFunc(func(o *options) { o.writeTimeout = d })
}

// WithReadBufferSize sets each connection's read buffer, in bytes.
// Default 32 KiB.
func WithReadBufferSize(n int) Option { return optionFunc(func(o *options) { o.readBuf = n }) }

// WithCompressThreshold sets the reply size, in bytes, from which a reply
// is compressed with the algorithm of the request (only when the request
// itself was compressed). Default 1024.
func WithCompressThreshold(n int) Option { return optionFunc(func(o *options) { o.compressMin = n }) }

// WithTLS makes ListenAndServe serve TLS with cfg. Default: no TLS.
func WithTLS(cfg *tls.Config) Option { return optionFunc(func(o *options) { o.tls = cfg }) }

// WithAuth checks every call with fn before its handler runs; a call that
// fails is answered Unauthenticated and its handler never runs. Default:
// no authentication.
func WithAuth(fn AuthFunc) Option { return optionFunc(func(o *options) { o.auth = fn }) }

// WithPlugin adds hooks: p may implement any of the hook interfaces
// (RegisterHook, ConnAcceptHook, ConnCloseHook, CallRefusedHook), which are
// the plug-in points that are not per call; what is per call (before and
// after a handler, each stream message) is an Interceptor's. A p that is
// also an Interceptor is not installed as one: pass it to WithInterceptor
// too. Default: none.
func WithPlugin(p any) Option {
	return optionFunc(func(o *options) { o.plugins = append(o.plugins, p) })
}

// WithLogger sets the logger for connection-level events (protocol errors,
// handler panics). Nothing is logged per successful call. Default
// slog.Default().
func WithLogger(l *slog.Logger) Option { return optionFunc(func(o *options) { o.logger = l }) }
