package fleetprom

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetrpc/fleet"
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
			"Time from the start of a call to its result on the client, in seconds; for a stream, from its open to its end.",
		), []string{"service", "method"}),
		msgSent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleet_client_msg_sent_total", ConstLabels: cl,
			Help: "Stream messages the client sent.",
		}, []string{"service", "method"}),
		msgRecv: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleet_client_msg_received_total", ConstLabels: cl,
			Help: "Stream messages the client received.",
		}, []string{"service", "method"}),
	}}
	m.x = newXMetrics(cl)
	m.rpc.init()
	return m
}

// Interceptor returns the client interceptor that counts and times calls
// (Call, Go and Send) and streams, and counts each stream's messages.
func (m *ClientMetrics) Interceptor() client.Interceptor { return (*clientInterceptor)(m) }

type clientInterceptor ClientMetrics

// WrapUnary counts and times each call.
func (i *clientInterceptor) WrapUnary(next client.Invoker) client.Invoker {
	r := &i.rpc
	// The chain serves every method of a connection: the first method
	// called skips the lookup's map reads, the others look theirs up.
	var first atomic.Pointer[mMetrics]
	return func(ctx context.Context, service, method string, args, reply any) error {
		mm := first.Load()
		if mm == nil || !mm.is(service, method, "") {
			mm = r.lookup(service, method, "", typeUnary)
			first.CompareAndSwap(nil, mm)
		}
		start := mm.begin()
		err := next(ctx, service, method, args, reply)
		r.end(ctx, mm, start, err)
		return err
	}
}

// WrapStream counts each stream's open, messages and end. A stream ends
// when Receive first returns an error (io.EOF: code ok) or, before that,
// when it is closed (code canceled); a refused open ends it at once.
func (i *clientInterceptor) WrapStream(next client.StreamFunc) client.StreamFunc {
	r := &i.rpc
	return func(ctx context.Context, spec *client.StreamSpec) (client.Stream, error) {
		mm := r.lookup(spec.Service, spec.Method, "", typeStream)
		start := mm.begin()
		st, err := next(ctx, spec)
		if err != nil {
			r.end(ctx, mm, start, err)
			return nil, err
		}
		return &clientCountingStream{Stream: st, r: r, m: mm, ctx: ctx, start: start}, nil
	}
}

// typeStream marks the client's stream series (the client's series have
// no type label: it tells them apart from calls for the message counts).
const typeStream = "stream"

// clientCountingStream counts a client stream's messages and its end.
type clientCountingStream struct {
	client.Stream
	r     *rpcMetrics
	m     *mMetrics
	ctx   context.Context
	start time.Duration
	once  sync.Once
}

func (s *clientCountingStream) Send(msg any) error {
	err := s.Stream.Send(msg)
	if err == nil {
		s.m.sent.Inc()
	}
	return err
}

func (s *clientCountingStream) Receive(msg any) error {
	err := s.Stream.Receive(msg)
	switch {
	case err == nil:
		s.m.received.Inc()
	case err == io.EOF:
		s.finish(nil)
	default:
		s.finish(err)
	}
	return err
}

func (s *clientCountingStream) Close() error {
	s.finish(fleet.NewError(fleet.Canceled, "stream closed before its end"))
	return s.Stream.Close()
}

// finish counts the stream's end once, with err's code.
func (s *clientCountingStream) finish(err error) {
	s.once.Do(func() { s.r.end(s.ctx, s.m, s.start, err) })
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
