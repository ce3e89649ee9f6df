package fleetprom

import (
	"context"

	"github.com/fleetrpc/fleet/client"
	"github.com/prometheus/client_golang/prometheus"
)

// ClientMetrics holds the metrics of Fleet clients. Make it with
// NewClientMetrics, register it with a prometheus.Registerer, and install
// it with Option (a Client) or XOption (an XClient). It is safe for
// concurrent use and may be shared by any number of clients.
type ClientMetrics struct {
	rpc rpcMetrics
	x   *xMetrics
}

// NewClientMetrics returns client metrics configured by opts. See
// docs/observability.md for the list.
func NewClientMetrics(opts ...Option) *ClientMetrics {
	cfg := newConfig(opts)
	cl := cfg.constLabels
	m := &ClientMetrics{rpc: rpcMetrics{
		cfg: cfg,
		started: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleet_client_started_total", ConstLabels: cl,
			Help: "Calls started by the client.",
		}, []string{"service", "method"}),
		handled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleet_client_handled_total", ConstLabels: cl,
			Help: "Calls completed by the client, by the fleet.Code they returned.",
		}, []string{"service", "method", "code"}),
		seconds: prometheus.NewHistogramVec(cfg.histogramOpts(
			"fleet_client_handling_seconds",
			"Time from the start of a call to its result on the client, in seconds.",
		), []string{"service", "method"}),
	}}
	m.x = newXMetrics(cl)
	m.rpc.init()
	return m
}

// Interceptor returns the client interceptor that counts and times calls
// (Call, Go and Send; streams pass through it).
func (m *ClientMetrics) Interceptor() client.Interceptor {
	return client.UnaryInterceptorFunc(func(next client.Invoker) client.Invoker {
		return func(ctx context.Context, service, method string, args, reply any) error {
			mm := m.rpc.lookup(service, method, "", "")
			start := mm.begin()
			err := next(ctx, service, method, args, reply)
			m.rpc.end(ctx, mm, start, err)
			return err
		}
	})
}

// Option returns the client option that installs Interceptor.
func (m *ClientMetrics) Option() client.Option { return client.WithInterceptor(m.Interceptor()) }

// XOption returns the XClient option that installs Interceptor on every
// connection the XClient opens (each attempt, a retry, a backup request,
// each server of a broadcast, is then counted as one call) and the
// governance metrics: servers known, picks per server, retries, backup
// requests and circuit-breaker state (client.WithObserver).
func (m *ClientMetrics) XOption() client.XOption {
	return client.XOptions(client.WithClientOptions(m.Option()), client.WithObserver(m.x))
}

// Describe implements prometheus.Collector.
func (m *ClientMetrics) Describe(ch chan<- *prometheus.Desc) { m.rpc.describe(ch); m.x.describe(ch) }

// Collect implements prometheus.Collector.
func (m *ClientMetrics) Collect(ch chan<- prometheus.Metric) { m.rpc.collect(ch); m.x.collect(ch) }
