package accesslog_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/internal/testutil"
	"github.com/fleetrpc/fleet/observability/accesslog"
	"github.com/fleetrpc/fleet/server"
)

// recorder is a slog.Handler that keeps every record, flattened.
type recorder struct {
	mu    sync.Mutex
	level slog.Level
	recs  []map[string]any
}

func (r *recorder) Enabled(_ context.Context, l slog.Level) bool { return l >= r.level }
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler           { return r }
func (r *recorder) WithGroup(string) slog.Handler                { return r }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	m := map[string]any{"msg": rec.Message, "level": rec.Level}
	rec.Attrs(func(a slog.Attr) bool {
		m[a.Key] = a.Value.Any()
		return true
	})
	r.mu.Lock()
	r.recs = append(r.recs, m)
	r.mu.Unlock()
	return nil
}

func (r *recorder) take() []map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.recs
	r.recs = nil
	return out
}

type Args struct{ A, B int }

func setup(t *testing.T, srvLog, cliLog *slog.Logger, opts ...accesslog.Option) *client.Client {
	t.Helper()
	srv := server.New(server.WithInterceptor(accesslog.Server(srvLog, opts...)))
	if err := srv.RegisterFunction("Arith", "Div", func(ctx context.Context, a *Args, q *int) error {
		if a.B == 0 {
			return fleet.NewError(fleet.InvalidArgument, "divide by zero")
		}
		*q = a.A / a.B
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	addr := testutil.Serve(t, srv)
	c, err := client.Dial(context.Background(), "tcp", addr, client.WithInterceptor(accesslog.Client(cliLog, opts...)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestRecords: one record per call on each side with the documented
// fields; failures at Warn with the error; the trace id from traceparent.
func TestRecords(t *testing.T) {
	srec, crec := &recorder{level: slog.LevelDebug}, &recorder{level: slog.LevelDebug}
	c := setup(t, slog.New(srec), slog.New(crec))
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	ctx := fleet.WithOutgoingMetadata(context.Background(), fleet.Metadata{"traceparent": "00-" + traceID + "-00f067aa0ba902b7-01"})
	var q int
	if err := c.Call(ctx, "Arith", "Div", &Args{A: 9, B: 3}, &q); err != nil || q != 3 {
		t.Fatalf("Div: %v %d", err, q)
	}
	if err := c.Call(context.Background(), "Arith", "Div", &Args{A: 1}, &q); fleet.CodeOf(err) != fleet.InvalidArgument {
		t.Fatalf("Div by zero: %v", err)
	}
	for side, rec := range map[string]*recorder{"server": srec, "client": crec} {
		recs := rec.take()
		if len(recs) != 2 {
			t.Fatalf("%s: %d records, want 2: %v", side, len(recs), recs)
		}
		ok, bad := recs[0], recs[1]
		for _, r := range recs {
			if r["msg"] != "fleet call" || r["side"] != side || r["service"] != "Arith" || r["method"] != "Div" {
				t.Errorf("%s record %v", side, r)
			}
			if _, has := r["duration"]; !has {
				t.Errorf("%s record without duration: %v", side, r)
			}
			if side == "server" && r["peer"] == nil {
				t.Errorf("server record without peer: %v", r)
			}
		}
		if ok["code"] != "ok" || ok["level"] != slog.LevelInfo || ok["trace_id"] != traceID || ok["error"] != nil {
			t.Errorf("%s success record %v", side, ok)
		}
		if bad["code"] != "invalid_argument" || bad["level"] != slog.LevelWarn || bad["error"] == nil || bad["trace_id"] != nil {
			t.Errorf("%s failure record %v", side, bad)
		}
	}
}

// TestSamplingAndDisabled: WithSampling(3) logs calls 1, 4, 7 of 7
// successes and every failure; a logger above Warn gets nothing.
func TestSamplingAndDisabled(t *testing.T) {
	srec, crec := &recorder{level: slog.LevelInfo}, &recorder{level: slog.LevelError}
	c := setup(t, slog.New(srec), slog.New(crec), accesslog.WithSampling(3))
	var q int
	for i := 0; i < 7; i++ {
		if err := c.Call(context.Background(), "Arith", "Div", &Args{A: 4, B: 2}, &q); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 2; i++ {
		if err := c.Call(context.Background(), "Arith", "Div", &Args{A: 4}, &q); err == nil {
			t.Fatal("no error")
		}
	}
	var oks, fails int
	for _, r := range srec.take() {
		if r["code"] == "ok" {
			oks++
		} else {
			fails++
		}
	}
	if oks != 3 || fails != 2 {
		t.Errorf("server logged %d successes and %d failures, want 3 and 2", oks, fails)
	}
	if got := crec.take(); len(got) != 0 {
		t.Errorf("disabled client logger got %d records", len(got))
	}
}
