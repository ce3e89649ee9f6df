package client

import (
	"context"
	"crypto/tls"
	"time"

	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/compress"
	"github.com/fleetrpc/fleet/protocol"
)

// Option configures a Client. Options are applied in order by Dial.
type Option interface{ apply(*options) }

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// Invoker performs a call.
type Invoker func(ctx context.Context, service, method string, args, reply any) error

type options struct {
	codec        codec.ID
	codecSet     bool
	streamWin    int // WithStreamWindow (stream.go)
	connWin      int // WithConnWindow (stream.go)
	comp         compress.ID
	compressMin  int
	limits       protocol.Limits
	heartbeat    time.Duration
	dialTimeout  time.Duration
	writeTimeout time.Duration
	readBuf      int
	tls          *tls.Config
	authToken    string
	interceptors []Interceptor // WithInterceptor (interceptor.go)
}

func defaultOptions() options {
	return options{
		heartbeat:    15 * time.Second,
		dialTimeout:  5 * time.Second,
		writeTimeout: 30 * time.Second,
		readBuf:      32 << 10,
		compressMin:  1024,
	}
}

// WithCodec encodes every call's arguments with the codec registered under
// id; the server answers in the same codec. Default: chosen per call by
// codec.For (Protobuf for proto messages, Raw for []byte, MessagePack
// otherwise).
func WithCodec(id codec.ID) Option {
	return optionFunc(func(o *options) { o.codec, o.codecSet = id, true })
}

// WithCompression compresses request payloads of at least threshold bytes
// with the compressor registered under id; the server then compresses
// large replies the same way. Default: no compression.
func WithCompression(id compress.ID, threshold int) Option {
	return optionFunc(func(o *options) { o.comp, o.compressMin = id, threshold })
}

// WithLimits sets the limits applied to responses. Default: protocol
// defaults (4 MiB frames).
func WithLimits(l protocol.Limits) Option { return optionFunc(func(o *options) { o.limits = l }) }

// WithHeartbeat sets the heartbeat interval: when nothing has arrived for
// d the client sends a ping, and when nothing arrives for a further d it
// closes the connection, failing its pending calls with Unavailable.
// Default 15 s; 0 disables heartbeats.
func WithHeartbeat(d time.Duration) Option { return optionFunc(func(o *options) { o.heartbeat = d }) }

// WithDialTimeout bounds connecting when the dial context has no earlier
// deadline. Default 5 s.
func WithDialTimeout(d time.Duration) Option {
	return optionFunc(func(o *options) { o.dialTimeout = d })
}

// WithWriteTimeout bounds each write to the connection; a server that
// stops reading for d has the connection closed. Default 30 s; 0: none.
func WithWriteTimeout(d time.Duration) Option {
	return optionFunc(func(o *options) { o.writeTimeout = d })
}

// WithTLS dials with TLS using cfg (network "tls", or "tcp" with this
// option). Default: no TLS.
func WithTLS(cfg *tls.Config) Option { return optionFunc(func(o *options) { o.tls = cfg }) }

// WithAuthToken sends token as the fleet.AuthKey metadata of every call
// (metadata set on the call's context wins). Default: none.
func WithAuthToken(token string) Option { return optionFunc(func(o *options) { o.authToken = token }) }

// (WithInterceptor is in interceptor.go.)
