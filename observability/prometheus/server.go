package fleetprom

import (
	"context"
	"net"
	"sync"
	"sync/atomic"

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
			cfg: cfg, routed: true,
			started: prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: "fleet_server_started_total", ConstLabels: cl,
				Help: "Calls and streams started on the server: handlers entered, after authentication (and, for calls, decoding).",
			}, seriesLabels),
			handled: prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: "fleet_server_handled_total", ConstLabels: cl,
				Help: "Calls and streams completed on the server, by the fleet.Code they ended with.",
			}, append(seriesLabels[:len(seriesLabels):len(seriesLabels)], "code")),
			seconds: prometheus.NewHistogramVec(cfg.histogramOpts(
				"fleet_server_handling_seconds",
				"Time handlers (with the interceptors installed after this one) took, in seconds; for a stream, from its open to its end.",
			), seriesLabels),
			msgRecv: prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: "fleet_server_msg_received_total", ConstLabels: cl,
				Help: "Stream messages the handlers received from clients.",
			}, seriesLabels),
			msgSent: prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: "fleet_server_msg_sent_total", ConstLabels: cl,
				Help: "Stream messages the handlers sent to clients.",
			}, seriesLabels),
			inflight: prometheus.NewDesc("fleet_server_in_flight",
				"Calls and streams running on the server now.", seriesLabels, cl),
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

// seriesLabels are the labels of the server's per-method series: the
// route is the way the call came (fleet.Route: native, grpc, http,
// jsonrpc, inprocess), the type go-grpc-middleware's grpc_type values
// (unary, client_stream, server_stream, bidi_stream).
var seriesLabels = []string{"service", "method", "route", "type"}

// Option returns the server option that installs the metrics: the
// interceptor (Interceptor) and the plugin (Plugin). Options added after it
// run inside it, so their time counts in fleet_server_handling_seconds.
func (m *ServerMetrics) Option() server.Option {
	return server.Options(server.WithPlugin(m.Plugin()), server.WithInterceptor(m.Interceptor()))
}

// Interceptor returns the server interceptor that counts calls and
// streams, times them, and counts each stream's messages, labelled by
// route. Use Option unless you order interceptors yourself.
func (m *ServerMetrics) Interceptor() server.Interceptor { return (*serverInterceptor)(m) }

type serverInterceptor ServerMetrics

// WrapUnary counts and times each call.
func (i *serverInterceptor) WrapUnary(next server.UnaryFunc) server.UnaryFunc {
	r := &i.rpc
	// The server builds a chain per method, so its calls all find the
	// series the first one found (for one route; other routes look
	// theirs up): a load and a comparison instead of the lookup's map
	// reads.
	var first atomic.Pointer[mMetrics]
	return func(ctx context.Context, info *fleet.CallInfo, args, reply any) error {
		mm := first.Load()
		if mm == nil || !mm.is(info.Service, info.Method, info.Route) {
			mm = r.lookup(info.Service, info.Method, info.Route, typeUnary)
			first.CompareAndSwap(nil, mm)
		}
		start := mm.begin()
		err := next(ctx, info, args, reply)
		r.end(ctx, mm, start, err)
		return err
	}
}

// WrapStream counts and times each stream, and passes on a Stream that
// counts the messages sent and received.
func (i *serverInterceptor) WrapStream(next server.StreamFunc) server.StreamFunc {
	r := &i.rpc
	return func(ctx context.Context, info *fleet.CallInfo, st server.Stream) error {
		mm := r.lookup(info.Service, info.Method, info.Route, streamType(st.Kind()))
		start := mm.begin()
		err := next(ctx, info, &countingStream{Stream: st, m: mm})
		r.end(ctx, mm, start, err)
		return err
	}
}

// streamType is the type label of a stream kind.
func streamType(k server.StreamKind) string {
	switch k {
	case server.ServerStreaming:
		return typeServerStream
	case server.ClientStreaming:
		return typeClientStream
	}
	return typeBidiStream
}

// countingStream counts a stream's messages: those Send wrote and those
// Receive returned (the client's half-close, io.EOF, is not a message).
type countingStream struct {
	server.Stream
	m *mMetrics
}

func (s *countingStream) Send(msg any) error {
	err := s.Stream.Send(msg)
	if err == nil {
		s.m.sent.Inc()
	}
	return err
}

func (s *countingStream) Receive(msg any) error {
	err := s.Stream.Receive(msg)
	if err == nil {
		s.m.received.Inc()
	}
	return err
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

// OnRegister creates the series of every registered method for the
// native route, with code ok.
func (p *serverPlugin) OnRegister(service string, methods []string) error {
	for _, name := range methods {
		p.rpc.lookup(service, name, fleet.RouteNative, typeUnary).handledFor(fleet.OK)
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
