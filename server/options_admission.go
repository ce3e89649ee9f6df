package server

import (
	"time"

	"golang.org/x/time/rate"
)

// admission holds the options that bound what peers may cost the server:
// memory, connections, and time to send a frame or to authenticate.
type admission struct {
	maxPending    int64 // server-wide request bytes held by handlers; <= 0: no limit
	frameTimeout  time.Duration
	authTimeout   time.Duration
	maxConns      int
	maxConnsPerIP int
	rate          rate.Limit
	rateBurst     int
	methodRates   []methodLimit
	adaptive      *AdaptiveLimit // adaptive.go; nil: off
}

// Defaults of the admission options.
const (
	// DefaultMaxPendingBytes is the default of WithMaxPendingBytes: 1 GiB.
	DefaultMaxPendingBytes = 1 << 30
	// DefaultFrameReadTimeout is the default of WithFrameReadTimeout: 10 s.
	DefaultFrameReadTimeout = 10 * time.Second
	// DefaultAuthTimeout is the default of WithAuthTimeout: 10 s.
	DefaultAuthTimeout = 10 * time.Second
)

func defaultAdmission() admission {
	return admission{
		maxPending:   DefaultMaxPendingBytes,
		frameTimeout: DefaultFrameReadTimeout,
		authTimeout:  DefaultAuthTimeout,
	}
}

// WithMaxPendingBytes bounds, across all connections, the bytes that
// running handlers hold: each request counts its frame buffer plus the most
// its payload may decompress to (the compressor's bound from the compressed
// bytes, within Limits.MaxDecompressedSize), until its handler returns.
// The decoded arguments are not measured (a codec may expand its input).
// When a request would not fit, the connection it came on stops being read
// until handlers finish (TCP flow control then slows the client); nothing
// is dropped. A frame not yet in the connection's read buffer is reserved
// at its announced size before it is read (the connection waits for room
// first), so frames being read count too; a slow sender holds its
// reservation for up to the frame-read timeout. A single request larger
// than the budget runs when nothing else is held. Default
// DefaultMaxPendingBytes (1 GiB); 0 or less means no server-wide limit.
func WithMaxPendingBytes(n int64) Option {
	return optionFunc(func(o *options) { o.maxPending = n })
}

// WithFrameReadTimeout bounds the time a frame may take to arrive once its
// first byte has: a frame that trickles in longer is cut off and its
// connection closed. The idle timeout (WithIdleTimeout) applies between
// frames, and also bounds a frame when it is the shorter. Default DefaultFrameReadTimeout (10 s); 0 or less
// disables it (the idle timeout then bounds a frame).
func WithFrameReadTimeout(d time.Duration) Option {
	return optionFunc(func(o *options) { o.frameTimeout = d })
}

// WithAuthTimeout closes a connection on which no call has passed the auth
// check (WithAuth) within d of its accept; a call or a stream that passes
// it authenticates the connection. It applies only with WithAuth; pings on
// a connection that has not authenticated are not answered (except the
// client's first Hello, the capability exchange streams wait for), so
// heartbeats cannot keep it open. Default DefaultAuthTimeout (10 s); 0 or
// less disables the timeout.
func WithAuthTimeout(d time.Duration) Option {
	return optionFunc(func(o *options) { o.authTimeout = d })
}

// WithMaxConns caps the connections served at once; a connection over the
// cap is sent a go-away and closed before anything is read from it, and
// counted (Server.RefusedConns). Default 0: no cap.
func WithMaxConns(n int) Option { return optionFunc(func(o *options) { o.maxConns = n }) }

// WithMaxConnsPerIP caps the connections served at once from one remote IP
// address (all Unix-socket peers count as one); over it a connection is
// refused as with WithMaxConns. Default 0: no cap.
func WithMaxConnsPerIP(n int) Option { return optionFunc(func(o *options) { o.maxConnsPerIP = n }) }

// WithRateLimit limits the calls the server admits, all connections and
// methods together, to perSecond on average with bursts of up to burst
// (a token bucket, golang.org/x/time/rate). A call over the limit is
// answered ResourceExhausted without running, with the response metadata
// RetryAfterKey saying when a token will be available; a oneway send over
// the limit is not dropped: the server stops reading its connection until
// a token is available. Checked after auth and before decompression.
// Default: no limit (perSecond <= 0).
func WithRateLimit(perSecond float64, burst int) Option {
	return optionFunc(func(o *options) { o.rate, o.rateBurst = rate.Limit(perSecond), burst })
}

// WithMethodRateLimit limits the calls of one method (service and method
// as callers name them) as WithRateLimit does for the server; both apply
// when both are set. It is the static form of SetMethodLimits with Rate
// and Burst (a later option for the same method replaces an earlier one);
// SetMethodLimits changes it while the server runs. Default: no limit.
func WithMethodRateLimit(service, method string, perSecond float64, burst int) Option {
	return optionFunc(func(o *options) {
		o.methodRates = append(o.methodRates, methodLimit{rateKey{service, method}, MethodLimits{Rate: perSecond, Burst: burst}})
	})
}
