package etcd

import (
	"context"
	"log/slog"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// zapLogger returns a zap logger that writes to l, so the etcd client
// logs through log/slog like the rest of Fleet.
func zapLogger(l *slog.Logger) *zap.Logger {
	return zap.New(slogCore{l: l})
}

// slogCore is a zapcore.Core writing to a slog.Logger.
type slogCore struct {
	l     *slog.Logger
	attrs []slog.Attr
}

func slogLevel(l zapcore.Level) slog.Level {
	switch {
	case l <= zapcore.DebugLevel:
		return slog.LevelDebug
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}

func attrs(fields []zapcore.Field) []slog.Attr {
	if len(fields) == 0 {
		return nil
	}
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		f.AddTo(enc)
	}
	out := make([]slog.Attr, 0, len(enc.Fields))
	for k, v := range enc.Fields {
		out = append(out, slog.Any(k, v))
	}
	return out
}

func (c slogCore) Enabled(l zapcore.Level) bool {
	return c.l.Enabled(context.Background(), slogLevel(l))
}

func (c slogCore) With(fields []zapcore.Field) zapcore.Core {
	return slogCore{l: c.l, attrs: append(append([]slog.Attr(nil), c.attrs...), attrs(fields)...)}
}

func (c slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	r := slog.NewRecord(e.Time, slogLevel(e.Level), e.Message, 0)
	r.AddAttrs(c.attrs...)
	r.AddAttrs(attrs(fields)...)
	if e.LoggerName != "" {
		r.AddAttrs(slog.String("logger", e.LoggerName))
	}
	return c.l.Handler().Handle(context.Background(), r)
}

func (c slogCore) Sync() error { return nil }
