package accesslog

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/server"
)

// Option configures Server and Client.
type Option func(*config)

type config struct {
	every   uint64
	ok, bad slog.Level
	traceID func(ctx context.Context, md fleet.Metadata) string
}

// WithSampling logs one successful call in every n (the first, the
// n+1-th, ...); failed calls are always logged. Default 1: every call.
// n below 1 counts as 1.
func WithSampling(n int) Option {
	return func(c *config) { c.every = uint64(max(n, 1)) }
}

// WithLevels sets the levels of successful and failed calls. Default
// slog.LevelInfo and slog.LevelWarn.
func WithLevels(ok, failed slog.Level) Option {
	return func(c *config) { c.ok, c.bad = ok, failed }
}

// WithTraceID sets how a call's trace id is found: fn gets the call's
// context and its metadata (request metadata on the server, outgoing
// metadata on the client) and returns the id, or "" for none. Default: the
// trace id field of the W3C "traceparent" metadata.
func WithTraceID(fn func(ctx context.Context, md fleet.Metadata) string) Option {
	return func(c *config) { c.traceID = fn }
}

func newConfig(opts []Option) *config {
	c := &config{every: 1, ok: slog.LevelInfo, bad: slog.LevelWarn, traceID: traceparentID}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Server returns a server interceptor that logs every call to logger
// (slog.Default() when nil), and every stream once, when it ends: message
// "fleet call" or "fleet stream", with the fields listed in
// docs/observability.md (a stream's also count its messages each way).
// Sampling (WithSampling) counts calls and streams together. Safe for
// concurrent use.
func Server(logger *slog.Logger, opts ...Option) server.Interceptor {
	return &serverLog{logger: logger, c: newConfig(opts)}
}

type serverLog struct {
	logger *slog.Logger
	c      *config
	n      atomic.Uint64
}

func (s *serverLog) log() *slog.Logger {
	if s.logger == nil {
		return slog.Default()
	}
	return s.logger
}

// WrapUnary logs each call.
func (s *serverLog) WrapUnary(next server.UnaryFunc) server.UnaryFunc {
	c := s.c
	return func(ctx context.Context, info *fleet.CallInfo, args, reply any) error {
		l := s.log()
		okOn, badOn := l.Enabled(ctx, c.ok), l.Enabled(ctx, c.bad)
		if !okOn && !badOn {
			return next(ctx, info, args, reply)
		}
		start := time.Now()
		err := next(ctx, info, args, reply)
		if !c.wanted(err, okOn, badOn, &s.n) {
			return err
		}
		attrs := make([]slog.Attr, 0, 10)
		attrs = serverAttrs(attrs, info, err, time.Since(start))
		if info.Oneway {
			attrs = append(attrs, slog.Bool("oneway", true))
		}
		c.log(ctx, l, "fleet call", info.Metadata(), err, attrs)
		return err
	}
}

// WrapStream logs each stream when it ends, with its message counts.
func (s *serverLog) WrapStream(next server.StreamFunc) server.StreamFunc {
	c := s.c
	return func(ctx context.Context, info *fleet.CallInfo, st server.Stream) error {
		l := s.log()
		okOn, badOn := l.Enabled(ctx, c.ok), l.Enabled(ctx, c.bad)
		if !okOn && !badOn {
			return next(ctx, info, st)
		}
		start := time.Now()
		cs := &countingStream{Stream: st}
		err := next(ctx, info, cs)
		if !c.wanted(err, okOn, badOn, &s.n) {
			return err
		}
		attrs := make([]slog.Attr, 0, 13)
		attrs = serverAttrs(attrs, info, err, time.Since(start))
		attrs = append(attrs, slog.String("stream", st.Kind().String()),
			slog.Int64("msgs_received", cs.received.Load()), slog.Int64("msgs_sent", cs.sent.Load()))
		c.log(ctx, l, "fleet stream", info.Metadata(), err, attrs)
		return err
	}
}

// serverAttrs appends the fields every server line has.
func serverAttrs(attrs []slog.Attr, info *fleet.CallInfo, err error, d time.Duration) []slog.Attr {
	attrs = append(attrs, slog.String("side", "server"), slog.String("service", info.Service), slog.String("method", info.Method),
		slog.String("route", string(info.Route)), slog.String("code", fleet.CodeOf(err).String()), slog.Duration("duration", d))
	if info.RemoteAddr != nil {
		attrs = append(attrs, slog.String("peer", info.RemoteAddr.String()))
	}
	return attrs
}

// countingStream counts the messages a stream handler sent and received
// (Send and Receive may run on two goroutines at once).
type countingStream struct {
	server.Stream
	sent, received atomic.Int64
}

func (s *countingStream) Send(msg any) error {
	err := s.Stream.Send(msg)
	if err == nil {
		s.sent.Add(1)
	}
	return err
}

func (s *countingStream) Receive(msg any) error {
	err := s.Stream.Receive(msg)
	if err == nil {
		s.received.Add(1)
	}
	return err
}

// Client returns a client interceptor that logs every call to logger
// (slog.Default() when nil). Safe for concurrent use.
func Client(logger *slog.Logger, opts ...Option) client.Interceptor {
	c := newConfig(opts)
	var n atomic.Uint64
	return client.UnaryInterceptorFunc(func(invoke client.Invoker) client.Invoker {
		return func(ctx context.Context, service, method string, args, reply any) error {
			l := logger
			if l == nil {
				l = slog.Default()
			}
			okOn, badOn := l.Enabled(ctx, c.ok), l.Enabled(ctx, c.bad)
			if !okOn && !badOn {
				return invoke(ctx, service, method, args, reply)
			}
			start := time.Now()
			err := invoke(ctx, service, method, args, reply)
			if !c.wanted(err, okOn, badOn, &n) {
				return err
			}
			attrs := make([]slog.Attr, 0, 8)
			attrs = append(attrs, slog.String("side", "client"), slog.String("service", service), slog.String("method", method),
				slog.String("code", fleet.CodeOf(err).String()), slog.Duration("duration", time.Since(start)))
			c.log(ctx, l, "fleet call", fleet.OutgoingMetadata(ctx), err, attrs)
			return err
		}
	})
}

// wanted applies the levels and the sampling to a finished call.
func (c *config) wanted(err error, okOn, badOn bool, n *atomic.Uint64) bool {
	if err != nil {
		return badOn
	}
	return okOn && (c.every == 1 || (n.Add(1)-1)%c.every == 0)
}

func (c *config) log(ctx context.Context, l *slog.Logger, msg string, md fleet.Metadata, err error, attrs []slog.Attr) {
	if id := c.traceID(ctx, md); id != "" {
		attrs = append(attrs, slog.String("trace_id", id))
	}
	level := c.ok
	if err != nil {
		level = c.bad
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	l.LogAttrs(ctx, level, msg, attrs...)
}

// traceparentID returns the trace-id field of a W3C traceparent value
// ("00-<32 hex>-<16 hex>-<2 hex>"), or "" when md has none or it is
// malformed.
func traceparentID(_ context.Context, md fleet.Metadata) string {
	tp := md["traceparent"]
	if len(tp) < 55 || tp[2] != '-' || tp[35] != '-' {
		return ""
	}
	id := tp[3:35]
	for i := 0; i < len(id); i++ {
		if c := id[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return ""
		}
	}
	if id == "00000000000000000000000000000000" {
		return ""
	}
	return id
}
