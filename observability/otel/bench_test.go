package fleetotel_test

import (
	"context"
	"testing"

	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/internal/testutil"
	fleetotel "github.com/fleetrpc/fleet/observability/otel"
	"github.com/fleetrpc/fleet/server"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// BenchmarkEcho measures calls over one TCP connection with 100
// concurrent callers (50 per GOMAXPROCS on 2 cores), without and with
// tracing (every call sampled, or 1% of calls, the latter also with
// WithParentBasedSampling; spans batched to a discarding exporter) and the duration metrics (SDK meter, manual
// reader), in the same run:
//
//	go test -run '^$' -bench Echo -benchtime 3s -count 5 -benchmem ./observability/otel/
func BenchmarkEcho(b *testing.B) {
	for _, tc := range []struct {
		name  string
		on    bool
		ratio float64
		pb    bool // WithParentBasedSampling
	}{{"plain", false, 0, false}, {"traced", true, 1, false}, {"sampled1pct", true, 0.01, false}, {"sampled1pctPB", true, 0.01, true}} {
		b.Run(tc.name, func(b *testing.B) {
			var sopts []server.Option
			var copts []client.Option
			if tc.on {
				var opts []fleetotel.Option
				if tc.pb {
					opts = append(opts, fleetotel.WithParentBasedSampling())
				}
				tel := benchTelemetry(b, tc.ratio, true, opts...)
				sopts, copts = append(sopts, tel.ServerOption()), append(copts, tel.ClientOption())
			}
			srv := server.New(sopts...)
			if err := srv.RegisterFunction("Echo", "Do", func(ctx context.Context, in *Req, out *Rep) error {
				out.N = in.N
				return nil
			}); err != nil {
				b.Fatal(err)
			}
			c := dialB(b, testutil.Serve(b, srv), copts...)
			b.SetParallelism(50)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				var out Rep
				for pb.Next() {
					if err := c.Call(context.Background(), "Echo", "Do", &Req{N: 1}, &out); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// benchTelemetry returns the Telemetry of the benchmarks: the SDK tracer
// sampling ParentBased(TraceIDRatioBased(ratio)), its spans batched to a
// discarding exporter, and, with metrics, the SDK meter provider with a
// manual reader; opts follow. The providers shut down when b ends.
func benchTelemetry(b *testing.B, ratio float64, metrics bool, opts ...fleetotel.Option) *fleetotel.Telemetry {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))))
	b.Cleanup(func() { tp.Shutdown(context.Background()) })
	all := []fleetotel.Option{fleetotel.WithTracerProvider(tp)}
	if metrics {
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		b.Cleanup(func() { mp.Shutdown(context.Background()) })
		all = append(all, fleetotel.WithMeterProvider(mp))
	}
	return fleetotel.New(append(all, opts...)...)
}
