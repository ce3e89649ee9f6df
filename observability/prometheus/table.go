package fleetprom

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// rpcMetrics is the started/handled/handling-time/in-flight family shared
// by the server and client side, and the server's stream message counts.
type rpcMetrics struct {
	cfg config
	// routed: the series carry the route and type labels after service
	// and method (the server's).
	routed  bool
	started *prometheus.CounterVec   // service, method[, route, type]
	handled *prometheus.CounterVec   // service, method[, route, type], code
	seconds *prometheus.HistogramVec // service, method[, route, type]
	// msgSent and msgRecv count stream messages: service, method[,
	// route, type].
	msgSent, msgRecv *prometheus.CounterVec
	// inflight describes the in-flight gauge (service, method, route,
	// type; nil on the client). Its value is derived when collected, as
	// a series' started calls less its handled ones, so that a call
	// updates no gauge (two compare-and-swap loops on a word every core
	// writes).
	inflight *prometheus.Desc

	mu sync.Mutex // serialises writers of methods
	// methods maps service, then method, to the method's resolved series
	// (one per route and type): copy-on-write, read without a lock.
	// String keys use the runtime's fast string hash (a struct key would
	// take the generic one).
	methods atomic.Pointer[map[string]map[string][]*mMetrics]
}

// The values of the type label: go-grpc-middleware's grpc_type values.
const (
	typeUnary        = "unary"
	typeServerStream = "server_stream"
	typeClientStream = "client_stream"
	typeBidiStream   = "bidi_stream"
)

// mMetrics are one series' resolved metrics: a method, on the server for
// one route and type.
type mMetrics struct {
	route   fleet.Route
	typ     string
	labels  []string // the label values before code
	started prometheus.Counter
	seconds prometheus.Observer
	handled [fleet.ShuttingDown + 1]atomic.Pointer[prometheus.Counter]
	vec     *prometheus.CounterVec
	// sent and received count stream messages (nil for unary calls).
	sent, received prometheus.Counter
	// otherHandled counts the calls handled with a code beyond handled's
	// (counted in vec too), for the in-flight gauge.
	otherHandled atomic.Int64
}

func (r *rpcMetrics) init() {
	empty := map[string]map[string][]*mMetrics{}
	r.methods.Store(&empty)
}

// findSeries returns the series of route and typ among ms, or nil.
func findSeries(ms []*mMetrics, route fleet.Route, typ string) *mMetrics {
	for _, m := range ms {
		if m.route == route && m.typ == typ {
			return m
		}
	}
	return nil
}

// lookup returns the series of service.method (for route and typ on the
// server; "" and "" on the client), making them on first use. The number
// of entries is bounded by the methods the server registered (it refuses
// unknown ones before interceptors run) times the routes and types, or the
// methods the client calls.
func (r *rpcMetrics) lookup(service, method string, route fleet.Route, typ string) *mMetrics {
	if m := findSeries((*r.methods.Load())[service][method], route, typ); m != nil {
		return m
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old := *r.methods.Load()
	if m := findSeries(old[service][method], route, typ); m != nil {
		return m
	}
	labels := []string{service, method}
	if r.routed {
		labels = append(labels, string(route), typ)
	}
	m := &mMetrics{
		route: route, typ: typ, labels: labels,
		started: r.started.WithLabelValues(labels...),
		seconds: r.seconds.WithLabelValues(labels...),
		vec:     r.handled,
	}
	if r.msgSent != nil && typ != typeUnary && typ != "" {
		m.sent = r.msgSent.WithLabelValues(labels...)
		m.received = r.msgRecv.WithLabelValues(labels...)
	}
	next := make(map[string]map[string][]*mMetrics, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	ms := make(map[string][]*mMetrics, len(old[service])+1)
	for k, v := range old[service] {
		ms[k] = v
	}
	ms[method] = append(append([]*mMetrics(nil), ms[method]...), m)
	next[service] = ms
	r.methods.Store(&next)
	return m
}

// is reports whether m is the series of service.method on route (the
// type aside).
func (m *mMetrics) is(service, method string, route fleet.Route) bool {
	return m.route == route && m.labels[1] == method && m.labels[0] == service
}

// handledFor returns the handled counter for code.
func (m *mMetrics) handledFor(code fleet.Code) prometheus.Counter {
	if int(code) >= len(m.handled) {
		m.otherHandled.Add(1)
		return m.vec.WithLabelValues(append(m.labels[:len(m.labels):len(m.labels)], code.String())...)
	}
	if p := m.handled[code].Load(); p != nil {
		return *p
	}
	c := m.vec.WithLabelValues(append(m.labels[:len(m.labels):len(m.labels)], code.String())...)
	m.handled[code].Store(&c)
	return c
}

// epoch anchors the clock reads of call durations: time.Since(epoch)
// reads the monotonic clock only, where time.Now also reads the wall clock.
var epoch = time.Now()

// begin counts a call's start; the returned time goes to end.
func (m *mMetrics) begin() time.Duration {
	m.started.Inc()
	return time.Since(epoch)
}

// end counts a call's outcome and duration.
func (r *rpcMetrics) end(ctx context.Context, m *mMetrics, start time.Duration, err error) {
	d := (time.Since(epoch) - start).Seconds()
	if r.cfg.exemplar != nil {
		if l := r.cfg.exemplar(ctx); len(l) > 0 {
			if eo, ok := m.seconds.(prometheus.ExemplarObserver); ok {
				eo.ObserveWithExemplar(d, l)
			} else {
				m.seconds.Observe(d)
			}
		} else {
			m.seconds.Observe(d)
		}
	} else {
		m.seconds.Observe(d)
	}
	m.handledFor(fleet.CodeOf(err)).Inc()
}

func (r *rpcMetrics) describe(ch chan<- *prometheus.Desc) {
	r.started.Describe(ch)
	r.handled.Describe(ch)
	r.seconds.Describe(ch)
	if r.msgSent != nil {
		r.msgSent.Describe(ch)
		r.msgRecv.Describe(ch)
	}
	if r.inflight != nil {
		ch <- r.inflight
	}
}

func (r *rpcMetrics) collect(ch chan<- prometheus.Metric) {
	r.started.Collect(ch)
	r.handled.Collect(ch)
	r.seconds.Collect(ch)
	if r.msgSent != nil {
		r.msgSent.Collect(ch)
		r.msgRecv.Collect(ch)
	}
	if r.inflight != nil {
		for _, svc := range *r.methods.Load() {
			for _, ms := range svc {
				for _, m := range ms {
					ch <- prometheus.MustNewConstMetric(r.inflight, prometheus.GaugeValue, m.inFlight(), m.labels...)
				}
			}
		}
	}
}

// inFlight returns the number of the method's calls started and not yet
// handled. The handled counts are read first: a call counts as started
// before it counts as handled, so the result is never negative (a call
// that starts between the reads is counted as running).
func (m *mMetrics) inFlight() float64 {
	handled := float64(m.otherHandled.Load())
	for i := range m.handled {
		if p := m.handled[i].Load(); p != nil {
			handled += counterValue(*p)
		}
	}
	return counterValue(m.started) - handled
}

// counterValue reads a counter's value.
func counterValue(c prometheus.Counter) float64 {
	var pb dto.Metric
	if err := c.Write(&pb); err != nil {
		return 0
	}
	return pb.GetCounter().GetValue()
}
