package fleetotel_test

import (
	"context"
	"encoding/binary"
	"testing"
	"unsafe"

	"github.com/fleetrpc/fleet"
	fleetotel "github.com/fleetrpc/fleet/observability/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// BenchmarkInterceptors measures the client and the server interceptor
// alone, without a connection: each call runs the client interceptor,
// whose invoker writes the request metadata in Fleet's wire form (as the
// client does) and runs the server interceptor on it around a handler
// that does nothing. It isolates the CPU time and allocations the
// interceptors add per call from the scheduling and collection effects
// of BenchmarkEcho, and so varies less on a busy machine. Besides the
// interceptors' own, each call allocates its CallInfo (part of the call's
// allocation in the server).
//
//	go test -run '^$' -bench Interceptors -benchmem ./observability/otel/
func BenchmarkInterceptors(b *testing.B) {
	for _, tc := range []struct {
		name  string
		ratio float64
		opts  []fleetotel.Option
		noMP  bool
	}{
		{"sampled1pct", 0.01, nil, false},
		{"sampled1pctPB", 0.01, []fleetotel.Option{fleetotel.WithParentBasedSampling()}, false},
		{"sampled1pctPBNoMetrics", 0.01, []fleetotel.Option{fleetotel.WithParentBasedSampling()}, true},
		{"traced", 1, nil, false},
	} {
		b.Run(tc.name, func(b *testing.B) {
			tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()),
				sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(tc.ratio))))
			defer tp.Shutdown(context.Background())
			opts := append([]fleetotel.Option{fleetotel.WithTracerProvider(tp)}, tc.opts...)
			if !tc.noMP {
				mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
				defer mp.Shutdown(context.Background())
				opts = append(opts, fleetotel.WithMeterProvider(mp))
			}
			tel := fleetotel.New(opts...)
			ci, si := tel.ClientInterceptor(), tel.ServerInterceptor()
			handler := func(ctx context.Context, args, reply any) error { return nil }
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				var wire []byte
				invoke := func(ctx context.Context, service, method string, args, reply any) error {
					md, kv := fleet.OutgoingPairs(ctx)
					wire = wire[:0]
					n := 0
					put := func(k, v string) {
						wire = binary.AppendUvarint(wire, uint64(len(k)))
						wire = append(wire, k...)
						wire = binary.AppendUvarint(wire, uint64(len(v)))
						wire = append(wire, v...)
						n++
					}
					for k, v := range md {
						put(k, v)
					}
					for i := 0; i < len(kv); i += 2 {
						put(kv[i], kv[i+1])
					}
					info := &fleet.CallInfo{Service: service, Method: method}
					if n > 0 {
						// The buffer is reused by the next call only;
						// nothing keeps the metadata past this one.
						info.SetWireMetadata(unsafe.String(&wire[0], len(wire)), n)
					}
					return si(context.Background(), info, args, reply, handler)
				}
				var req Req
				var rep Rep
				for pb.Next() {
					if err := ci(context.Background(), "Echo", "Do", &req, &rep, invoke); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
