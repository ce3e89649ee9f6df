package bench

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	var s []time.Duration
	for i := 100; i >= 1; i-- {
		s = append(s, time.Duration(i))
	}
	l := summarize(s)
	for _, c := range []struct {
		name      string
		got, want time.Duration
	}{
		{"min", l.Min, 1}, {"p50", l.P50, 50}, {"p90", l.P90, 90}, {"p99", l.P99, 99},
		{"p99.9", l.P999, 100}, {"max", l.Max, 100}, {"mean", l.Mean, 50},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
	if len(l.Curve) != len(curvePercentiles) {
		t.Errorf("curve has %d points", len(l.Curve))
	}
	if z := summarize(nil); z.Max != 0 || z.Curve != nil {
		t.Error("summarize(nil) is not zero")
	}
}

func TestLoad(t *testing.T) {
	errBoom := errors.New("boom")
	r := load{callers: 4, total: 100, duration: 5 * time.Second, latency: true}.run(context.Background(), nil,
		func(_ context.Context, i int64) error {
			if i%10 == 0 {
				return errBoom
			}
			return nil
		})
	if r.calls != 100 || r.errors != 10 || !errors.Is(r.firstErr, errBoom) || r.capped || len(r.samples) != 100 {
		t.Errorf("calls %d errors %d first %v capped %v samples %d", r.calls, r.errors, r.firstErr, r.capped, len(r.samples))
	}
	// A duration cap stops an unbounded load.
	r = load{callers: 2, duration: 50 * time.Millisecond}.run(context.Background(), nil,
		func(context.Context, int64) error { time.Sleep(time.Millisecond); return nil })
	if !r.capped || r.calls == 0 || r.elapsed > 2*time.Second {
		t.Errorf("capped %v calls %d elapsed %v", r.capped, r.calls, r.elapsed)
	}
	// Calls still blocked after the grace period are abandoned.
	r = load{callers: 3, duration: 10 * time.Millisecond, grace: 20 * time.Millisecond}.run(context.Background(), nil,
		func(ctx context.Context, _ int64) error { <-ctx.Done(); return ctx.Err() })
	if r.abandoned != 3 || r.calls != 0 {
		t.Errorf("abandoned %d calls %d", r.abandoned, r.calls)
	}
}

func TestFormat(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{num(1234567), "1,234,567"}, {num(999), "999"}, {num(-1234), "-1,234"},
		{sig(0.01234), "0.012"}, {sig(1.234), "1.23"}, {sig(12.34), "12.3"}, {sig(1234.5), "1,235"},
		{ratio(3, 1), "3.00×"}, {ratio(1, 0), "—"}, {ms(1500 * time.Microsecond), "1.50"},
		{sleepString(10 * time.Millisecond), "10 ms"}, {sleepString(0), "0 ms"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
