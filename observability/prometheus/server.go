package fleetprom

import (
	"context"
	"net"
	"sync"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/server"
	"github.com/prometheus/client_golang/prometheus"
)

// ServerMetrics holds the metrics of one or more Fleet servers. Make it
// with NewServerMetrics, register it with a prometheus.Registerer, and
// install it with Option. It is safe for concurrent use.
type ServerMetrics struct {
	rpc       rpcMetrics
	conns     prometheus.Gauge
	accepted  prometheus.Counter
	recvBytes prometheus.Counter
	sentBytes prometheus.Counter
	refused   *prometheus.CounterVec // code
}

// NewServerMetrics returns server metrics configured by opts. See
// docs/observability.md for the list.
func NewServerMetrics(opts ...Option) *ServerMetrics {
	cfg := newConfig(opts)
	cl := cfg.constLabels
	m := &ServerMetrics{
		rpc: rpcMetrics{
			cfg: cfg,
			started: prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: "fleet_server_started_total", ConstLabels: cl,
				Help: "Calls started on the server: handlers entered, after decoding and authentication.",
			}, []string{"service", "method"}),
			handled: prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: "fleet_server_handled_total", ConstLabels: cl,
				Help: "Calls completed on the server, by the fleet.Code they returned.",
			}, []string{"service", "method", "code"}),
			seconds: prometheus.NewHistogramVec(cfg.histogramOpts(
				"fleet_server_handling_seconds",
				"Time handlers (with the interceptors installed after this one) took, in seconds.",
			), []string{"service", "method"}),
			inflight: prometheus.NewDesc("fleet_server_in_flight",
				"Calls running on the server now.", []string{"service", "method"}, cl),
		},
		conns: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fleet_server_connections", ConstLabels: cl,
			Help: "Client connections open now.",
		}),
		accepted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fleet_server_connections_accepted_total", ConstLabels: cl,
			Help: "Client connections accepted.",
		}),
		recvBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fleet_server_received_bytes_total", ConstLabels: cl,
			Help: "Bytes read from client connections (frames of every type, headers included).",
		}),
		sentBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fleet_server_sent_bytes_total", ConstLabels: cl,
			Help: "Bytes written to client connections (frames of every type, headers included).",
		}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleet_server_refused_total", ConstLabels: cl,
			Help: "Requests answered without running: unknown service or method (not_found), server shutting down (shutting_down), per-connection concurrency cap (resource_exhausted).",
		}, []string{"code"}),
	}
	m.rpc.init()
	return m
}

// Option returns the server option that installs the metrics: the
// interceptor (Interceptor) and the plugin (Plugin). Options added after it
// run inside it, so their time counts in fleet_server_handling_seconds.
func (m *ServerMetrics) Option() server.Option {
	return server.Options(server.WithPlugin(m.Plugin()), server.WithInterceptor(m.Interceptor()))
}

// Interceptor returns the server interceptor that counts calls and times
// them. Use Option unless you order interceptors yourself.
func (m *ServerMetrics) Interceptor() server.Interceptor {
	return func(ctx context.Context, info *fleet.CallInfo, args, reply any, next server.Handler) error {
		mm := m.rpc.lookup(info.Service, info.Method)
		start := mm.begin()
		err := next(ctx, args, reply)
		m.rpc.end(ctx, mm, start, err)
		return err
	}
}

// Plugin returns the server plugin that counts connections and their
// bytes, refused calls, and creates every registered method's series at
// registration (so they read 0 before the first call). Use Option unless
// you install plugins yourself.
func (m *ServerMetrics) Plugin() any { return (*serverPlugin)(m) }

// Describe implements prometheus.Collector.
func (m *ServerMetrics) Describe(ch chan<- *prometheus.Desc) {
	m.rpc.describe(ch)
	m.conns.Describe(ch)
	m.accepted.Describe(ch)
	m.recvBytes.Describe(ch)
	m.sentBytes.Describe(ch)
	m.refused.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *ServerMetrics) Collect(ch chan<- prometheus.Metric) {
	m.rpc.collect(ch)
	m.conns.Collect(ch)
	m.accepted.Collect(ch)
	m.recvBytes.Collect(ch)
	m.sentBytes.Collect(ch)
	m.refused.Collect(ch)
}

type serverPlugin ServerMetrics

var (
	_ server.RegisterHook    = (*serverPlugin)(nil)
	_ server.ConnAcceptHook  = (*serverPlugin)(nil)
	_ server.CallRefusedHook = (*serverPlugin)(nil)
)

// OnRegister creates the series of every registered method, with code ok.
func (p *serverPlugin) OnRegister(service string, methods []string) error {
	for _, name := range methods {
		p.rpc.lookup(service, name).handledFor(fleet.OK)
	}
	return nil
}

// OnConnAccept wraps the connection to count its bytes; the open-connection
// gauge drops when the server closes it.
func (p *serverPlugin) OnConnAccept(nc net.Conn) (net.Conn, bool) {
	p.accepted.Inc()
	p.conns.Inc()
	return &countingConn{Conn: nc, m: (*ServerMetrics)(p)}, true
}

// OnCallRefused counts a refused request by code only: its names are the
// caller's choice and would make label values unbounded.
func (p *serverPlugin) OnCallRefused(_, _ string, err *fleet.Error) {
	p.refused.WithLabelValues(fleet.CodeOf(err).String()).Inc()
}

// countingConn counts the bytes through a served connection.
type countingConn struct {
	net.Conn
	m    *ServerMetrics
	once sync.Once
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.m.recvBytes.Add(float64(n))
	}
	return n, err
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if n > 0 {
		c.m.sentBytes.Add(float64(n))
	}
	return n, err
}

// Close closes the connection and, the first time, lowers the gauge.
func (c *countingConn) Close() error {
	c.once.Do(c.m.conns.Dec)
	return c.Conn.Close()
}
