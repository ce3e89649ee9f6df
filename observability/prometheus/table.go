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
// by the server and client side.
type rpcMetrics struct {
	cfg     config
	started *prometheus.CounterVec   // service, method
	handled *prometheus.CounterVec   // service, method, code
	seconds *prometheus.HistogramVec // service, method
	// inflight describes the in-flight gauge (service, method; nil on
	// the client). Its value is derived when collected, as a method's
	// started calls less its handled ones, so that a call updates no
	// gauge (two compare-and-swap loops on a word every core writes).
	inflight *prometheus.Desc

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
	handled         [fleet.ShuttingDown + 1]atomic.Pointer[prometheus.Counter]
	vec             *prometheus.CounterVec
	// otherHandled counts the calls handled with a code beyond handled's
	// (counted in vec too), for the in-flight gauge.
	otherHandled atomic.Int64
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
		m.otherHandled.Add(1)
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
	if r.inflight != nil {
		ch <- r.inflight
	}
}

func (r *rpcMetrics) collect(ch chan<- prometheus.Metric) {
	r.started.Collect(ch)
	r.handled.Collect(ch)
	r.seconds.Collect(ch)
	if r.inflight != nil {
		for _, ms := range *r.methods.Load() {
			for _, m := range ms {
				ch <- prometheus.MustNewConstMetric(r.inflight, prometheus.GaugeValue, m.inFlight(), m.service, m.method)
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
