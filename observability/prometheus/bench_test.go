package fleetprom_test

import (
	"context"
	"testing"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	fleetprom "github.com/fleetrpc/fleet/observability/prometheus"
	"github.com/fleetrpc/fleet/server"
	"github.com/prometheus/client_golang/prometheus"
)

// BenchmarkEcho measures calls per second over one TCP connection with 100
// concurrent callers (50 per GOMAXPROCS on 2 cores), without and with the
// server and client metrics, in the same run:
//
//	go test -run '^$' -bench Echo -benchtime 3s -count 5 ./observability/prometheus/
func BenchmarkEcho(b *testing.B) {
	for _, tc := range []struct {
		name    string
		metrics bool
	}{{"plain", false}, {"metrics", true}} {
		b.Run(tc.name, func(b *testing.B) {
			var sopts []server.Option
			var copts []client.Option
			if tc.metrics {
				reg := prometheus.NewRegistry()
				sm, cm := fleetprom.NewServerMetrics(), fleetprom.NewClientMetrics()
				reg.MustRegister(sm, cm)
				sopts, copts = append(sopts, sm.Option()), append(copts, cm.Option())
			}
			srv := server.New(sopts...)
			addr := serveB(b, srv)
			c, err := client.Dial(context.Background(), "tcp", addr, copts...)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			b.SetParallelism(50)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				var sum int
				for pb.Next() {
					if err := c.Call(context.Background(), "Arith", "Add", &Args{A: 1, B: 2}, &sum); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkInterceptors measures the client and the server interceptor
// alone, without a connection: each call runs the client interceptor,
// whose invoker runs the server interceptor around a handler that does
// nothing. It shows the metrics' own cost per call (two counters, the
// histogram with its native buckets and two clock reads per side; the
// in-flight gauge is derived when scraped) apart from the scheduling and
// collections of
// BenchmarkEcho:
//
//	go test -run '^$' -bench Interceptors -cpu 1 -benchmem ./observability/prometheus/
func BenchmarkInterceptors(b *testing.B) {
	reg := prometheus.NewRegistry()
	sm, cm := fleetprom.NewServerMetrics(), fleetprom.NewClientMetrics()
	reg.MustRegister(sm, cm)
	si := sm.Interceptor().WrapUnary(func(ctx context.Context, info *fleet.CallInfo, args, reply any) error { return nil })
	ci := cm.Interceptor()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		info := &fleet.CallInfo{Service: "Arith", Method: "Add", Route: fleet.RouteNative}
		invoke := func(ctx context.Context, service, method string, args, reply any) error {
			return si(ctx, info, args, reply)
		}
		call := ci.WrapUnary(invoke)
		for pb.Next() {
			if err := call(context.Background(), "Arith", "Add", nil, nil); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
