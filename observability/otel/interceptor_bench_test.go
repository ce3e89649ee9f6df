package fleetotel_test

import (
	"context"
	"testing"

	"github.com/fleetrpc/fleet"
	fleetotel "github.com/fleetrpc/fleet/observability/otel"
	"github.com/fleetrpc/fleet/protocol"
)

// BenchmarkInterceptors measures the client and the server interceptor
// alone, without a connection: each call runs the client interceptor,
// whose invoker builds the request frame with protocol.BeginFrame (as
// the client does), reads it back with protocol.Parse (as the server
// does) and runs the server interceptor on its metadata around a handler
// that does nothing; the times include that framing (about 50 ns). It
// isolates the CPU time and allocations the interceptors add per call
// from the scheduling and collection effects of BenchmarkEcho, and so
// varies less on a busy machine. Besides the
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
			tel := benchTelemetry(b, tc.ratio, !tc.noMP, tc.opts...)
			ci := tel.ClientInterceptor()
			si := tel.ServerInterceptor().WrapUnary(func(ctx context.Context, info *fleet.CallInfo, args, reply any) error { return nil })
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				var buf []byte
				var mdBuf [256]byte
				limits := protocol.Limits{}.WithDefaults()
				invoke := func(ctx context.Context, service, method string, args, reply any) error {
					// The request's metadata as the client writes it and
					// the server reads it.
					md, kv := fleet.OutgoingPairs(ctx)
					var start int
					buf, start = protocol.BeginFrame(buf[:0], &protocol.Header{Type: protocol.TypeRequest}, service, method, md, kv...)
					if err := protocol.EndFrame(buf, start, 0); err != nil {
						return err
					}
					f, err := protocol.Parse(buf[protocol.PrefixSize:], &limits)
					if err != nil {
						return err
					}
					info := &fleet.CallInfo{Service: service, Method: method, Route: fleet.RouteNative}
					// The section is copied into mdBuf, which the next
					// call reuses; nothing keeps it past this one.
					info.SetWireMetadata(f.MetadataSectionIn(mdBuf[:0]))
					return si(context.Background(), info, args, reply)
				}
				var req Req
				var rep Rep
				call := ci.WrapUnary(invoke)
				for pb.Next() {
					if err := call(context.Background(), "Echo", "Do", &req, &rep); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
