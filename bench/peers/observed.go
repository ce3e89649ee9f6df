package peers

import (
	"context"

	fleetotel "github.com/fleetrpc/fleet/observability/otel"
	fleetprom "github.com/fleetrpc/fleet/observability/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	noopmetric "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// FleetObserved is the Fleet peer with metrics and tracing on both sides,
// as a production service runs them: one metrics pipeline, Prometheus
// server and client metrics (module observability/prometheus, registered
// with a registry), and OpenTelemetry spans (module observability/otel)
// with the SDK's tracer provider sampling
// ParentBased(TraceIDRatioBased(ObservedSampleRatio)) and spans batched to
// an exporter that drops them. As the sampler is ParentBased, the
// interceptors are told so (fleetotel.WithParentBasedSampling): a server
// call whose caller was not sampled starts no span. Beside "fleet" in the
// same run it measures what observability costs. A variant: measured only
// when named in --peers.
const FleetObserved = "fleet-obs"

// FleetObservedAll is FleetObserved with everything on: both metrics
// pipelines (Prometheus, and OpenTelemetry call-duration metrics with the
// SDK's meter provider and a manual reader) and tracing with the default
// fleetotel options, the set fleet-obs once measured. A
// production team runs one of the two metrics pipelines for the same
// calls; this variant is the upper bound. A variant.
const FleetObservedAll = "fleet-obs-all"

// ObservedSampleRatio is the share of root calls fleet-obs traces.
const ObservedSampleRatio = 0.01

func init() {
	Register(&Peer{
		Name:       FleetObserved,
		Title:      "Fleet + Prometheus metrics + OTel tracing",
		Desc:       "as fleet, with Prometheus metrics and OpenTelemetry tracing (1% of calls sampled, ParentBased) on client and server",
		Ops:        []Op{OpEcho, OpAdd, OpLog, OpLogOneway},
		OnewayDesc: "client.Send (oneway frame)",
		NewServer:  observedServerFn(false),
		Dial:       observedDialFn(false),
		Variant:    true,
	})
	Register(&Peer{
		Name:       FleetObservedAll,
		Title:      "Fleet + Prometheus + OTel metrics + OTel tracing",
		Desc:       "as fleet, with Prometheus metrics, OpenTelemetry call-duration metrics and OpenTelemetry tracing (1% of calls sampled) on client and server",
		Ops:        []Op{OpEcho, OpAdd, OpLog, OpLogOneway},
		OnewayDesc: "client.Send (oneway frame)",
		NewServer:  observedServerFn(true),
		Dial:       observedDialFn(true),
		Variant:    true,
	})
}

// observedServerFn returns the NewServer of fleet-obs (all false) or
// fleet-obs-all (all true).
func observedServerFn(all bool) func(ServerOptions) (Server, error) {
	return func(o ServerOptions) (Server, error) {
		tel := newTelemetry(all)
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
	}
}

// observedDialFn returns the Dial of fleet-obs or fleet-obs-all.
func observedDialFn(all bool) func(context.Context, string, ClientOptions) (Client, error) {
	return func(ctx context.Context, addr string, o ClientOptions) (Client, error) {
		tel := newTelemetry(all)
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
	}
}

// telemetry is one side's OpenTelemetry providers.
type telemetry struct {
	*fleetotel.Telemetry
	tp *sdktrace.TracerProvider
	mp *sdkmetric.MeterProvider // nil without OpenTelemetry metrics
}

// newTelemetry returns the tracing of fleet-obs (all false: the SDK
// tracer, the meter provider a no-op so the call-duration histograms
// record nothing) or of fleet-obs-all (all true: plus the SDK meter
// provider, with the default fleetotel options).
func newTelemetry(all bool) *telemetry {
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ObservedSampleRatio))),
		sdktrace.WithBatcher(dropExporter{}))
	t := &telemetry{tp: tp}
	opts := []fleetotel.Option{fleetotel.WithTracerProvider(tp)}
	if all {
		t.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		opts = append(opts, fleetotel.WithMeterProvider(t.mp))
	} else {
		opts = append(opts, fleetotel.WithMeterProvider(noopmetric.NewMeterProvider()),
			fleetotel.WithParentBasedSampling())
	}
	t.Telemetry = fleetotel.New(opts...)
	return t
}

func (t *telemetry) shutdown() {
	t.tp.Shutdown(context.Background())
	if t.mp != nil {
		t.mp.Shutdown(context.Background())
	}
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
