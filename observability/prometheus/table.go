package fleetprom

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/prometheus/client_golang/prometheus"
)

// rpcMetrics is the started/handled/handling-time/in-flight family shared
// by the server and client side.
type rpcMetrics struct {
	cfg      config
	started  *prometheus.CounterVec   // service, method
	handled  *prometheus.CounterVec   // service, method, code
	seconds  *prometheus.HistogramVec // service, method
	inflight *prometheus.GaugeVec     // service, method; nil on the client

	mu sync.Mutex // serialises writers of methods
	// methods maps service, then method, to the resolved series:
	// copy-on-write, read without a lock. String keys use the runtime's
	// fast string hash (a struct key would take the generic one).
	methods atomic.Pointer[map[string]map[string]*mMetrics]
}

// mMetrics are one method's resolved series.
type mMetrics struct {
	service, method string
	started         prometheus.Counter
	seconds         prometheus.Observer
	inflight        prometheus.Gauge
	handled         [fleet.ShuttingDown + 1]atomic.Pointer[prometheus.Counter]
	vec             *prometheus.CounterVec
}

func (r *rpcMetrics) init() {
	empty := map[string]map[string]*mMetrics{}
	r.methods.Store(&empty)
}

// lookup returns the series of service.method, making them on first use.
// The number of entries is bounded by the methods the server registered
// (it refuses unknown ones before interceptors run) or the client calls.
func (r *rpcMetrics) lookup(service, method string) *mMetrics {
	if m := (*r.methods.Load())[service][method]; m != nil {
		return m
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old := *r.methods.Load()
	if m := old[service][method]; m != nil {
		return m
	}
	m := &mMetrics{
		service: service, method: method,
		started: r.started.WithLabelValues(service, method),
		seconds: r.seconds.WithLabelValues(service, method),
		vec:     r.handled,
	}
	if r.inflight != nil {
		m.inflight = r.inflight.WithLabelValues(service, method)
	}
	next := make(map[string]map[string]*mMetrics, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	ms := make(map[string]*mMetrics, len(old[service])+1)
	for k, v := range old[service] {
		ms[k] = v
	}
	ms[method] = m
	next[service] = ms
	r.methods.Store(&next)
	return m
}

// handledFor returns the handled counter for code.
func (m *mMetrics) handledFor(code fleet.Code) prometheus.Counter {
	if int(code) >= len(m.handled) {
		return m.vec.WithLabelValues(m.service, m.method, code.String())
	}
	if p := m.handled[code].Load(); p != nil {
		return *p
	}
	c := m.vec.WithLabelValues(m.service, m.method, code.String())
	m.handled[code].Store(&c)
	return c
}

// epoch anchors the clock reads of call durations: time.Since(epoch)
// reads the monotonic clock only, where time.Now also reads the wall clock.
var epoch = time.Now()

// begin counts a call's start; the returned time goes to end.
func (m *mMetrics) begin() time.Duration {
	m.started.Inc()
	if m.inflight != nil {
		m.inflight.Inc()
	}
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
	if m.inflight != nil {
		m.inflight.Dec()
	}
	m.handledFor(fleet.CodeOf(err)).Inc()
}

func (r *rpcMetrics) describe(ch chan<- *prometheus.Desc) {
	r.started.Describe(ch)
	r.handled.Describe(ch)
	r.seconds.Describe(ch)
	if r.inflight != nil {
		r.inflight.Describe(ch)
	}
}

func (r *rpcMetrics) collect(ch chan<- prometheus.Metric) {
	r.started.Collect(ch)
	r.handled.Collect(ch)
	r.seconds.Collect(ch)
	if r.inflight != nil {
		r.inflight.Collect(ch)
	}
}
