package peers

import (
	"context"

	fleetotel "github.com/fleetrpc/fleet/observability/otel"
	fleetprom "github.com/fleetrpc/fleet/observability/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// FleetObserved is the Fleet peer with metrics and tracing on both sides,
// as a production service runs it: Prometheus server and client metrics
// (module observability/prometheus, registered with a registry), and
// OpenTelemetry spans and call-duration metrics (module
// observability/otel) with the SDK's tracer provider sampling
// ParentBased(TraceIDRatioBased(ObservedSampleRatio)), spans batched to an
// exporter that drops them, and the SDK's meter provider with a manual
// reader. Beside "fleet" in the same run it measures what observability
// costs. A variant: measured only when named in --peers.
const FleetObserved = "fleet-obs"

// ObservedSampleRatio is the share of root calls fleet-obs traces.
const ObservedSampleRatio = 0.01

func init() {
	Register(&Peer{
		Name:       FleetObserved,
		Title:      "Fleet + metrics + tracing",
		Desc:       "as fleet, with Prometheus metrics and OpenTelemetry tracing (1% of calls sampled) and call-duration metrics on client and server",
		Ops:        []Op{OpEcho, OpAdd, OpLog, OpLogOneway},
		OnewayDesc: "client.Send (oneway frame)",
		NewServer: func(o ServerOptions) (Server, error) {
			tel := newTelemetry()
			pm := fleetprom.NewServerMetrics()
			reg := prometheus.NewRegistry()
			if err := reg.Register(pm); err != nil {
				return nil, err
			}
			s, err := newFleetServer(o, registerPointer, pm.Option(), tel.ServerOption())
			if err != nil {
				tel.shutdown()
				return nil, err
			}
			return &observedServer{Server: s, tel: tel}, nil
		},
		Dial: func(ctx context.Context, addr string, o ClientOptions) (Client, error) {
			tel := newTelemetry()
			pm := fleetprom.NewClientMetrics()
			reg := prometheus.NewRegistry()
			if err := reg.Register(pm); err != nil {
				return nil, err
			}
			c, err := dialFleetWith(ctx, addr, o, pm.Option(), tel.ClientOptionFor(addr))
			if err != nil {
				tel.shutdown()
				return nil, err
			}
			return &observedClient{Client: c, tel: tel}, nil
		},
		Variant: true,
	})
}

// telemetry is one side's OpenTelemetry providers.
type telemetry struct {
	*fleetotel.Telemetry
	tp *sdktrace.TracerProvider
	mp *sdkmetric.MeterProvider
}

func newTelemetry() *telemetry {
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ObservedSampleRatio))),
		sdktrace.WithBatcher(dropExporter{}))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	return &telemetry{
		Telemetry: fleetotel.New(fleetotel.WithTracerProvider(tp), fleetotel.WithMeterProvider(mp)),
		tp:        tp, mp: mp,
	}
}

func (t *telemetry) shutdown() {
	t.tp.Shutdown(context.Background())
	t.mp.Shutdown(context.Background())
}

// dropExporter receives the sampled spans and drops them.
type dropExporter struct{}

func (dropExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (dropExporter) Shutdown(context.Context) error                             { return nil }

type observedServer struct {
	Server
	tel *telemetry
}

func (s *observedServer) Close() error {
	err := s.Server.Close()
	s.tel.shutdown()
	return err
}

type observedClient struct {
	Client
	tel *telemetry
}

func (c *observedClient) Close() error {
	err := c.Client.Close()
	c.tel.shutdown()
	return err
}
