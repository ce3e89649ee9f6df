package fleetprom

import (
	"github.com/fleetrpc/fleet/server"
	"github.com/prometheus/client_golang/prometheus"
)

// AdmissionCollector exports a server's admission stages
// (server.Server.AdmissionStats) at each scrape, labelled by stage
// (server.StageConns, "rate", "method-concurrency", ...) and, for the
// per-method stages, service and method (as the limit was set, so bounded
// by the limits configured):
//
//	fleet_server_admission_limit          gauge    the stage's bound, in its unit
//	fleet_server_admission_in_use         gauge    what counts against it now
//	fleet_server_admission_waiting        gauge    what waits for it now
//	fleet_server_admission_refused_total  counter  what it refused since the server started
//
// Safe for concurrent use; register it with one registry.
type AdmissionCollector struct {
	srv                            *server.Server
	limit, inUse, waiting, refused *prometheus.Desc
}

// NewAdmissionCollector returns the collector of srv's admission stages,
// with constLabels (may be nil) on every series.
func NewAdmissionCollector(srv *server.Server, constLabels prometheus.Labels) *AdmissionCollector {
	labels := []string{"stage", "service", "method"}
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, constLabels)
	}
	return &AdmissionCollector{
		srv:     srv,
		limit:   d("fleet_server_admission_limit", "Bound of an admission stage, in the stage's unit (connections, calls, calls per second, bytes)."),
		inUse:   d("fleet_server_admission_in_use", "What counts against an admission stage's bound now."),
		waiting: d("fleet_server_admission_waiting", "Calls or reservations waiting for an admission stage now."),
		refused: d("fleet_server_admission_refused_total", "Connections or calls an admission stage refused."),
	}
}

// Describe implements prometheus.Collector.
func (c *AdmissionCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.limit
	ch <- c.inUse
	ch <- c.waiting
	ch <- c.refused
}

// Collect implements prometheus.Collector.
func (c *AdmissionCollector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.srv.AdmissionStats() {
		lv := []string{st.Stage, st.Service, st.Method}
		ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, st.Limit, lv...)
		ch <- prometheus.MustNewConstMetric(c.inUse, prometheus.GaugeValue, float64(st.InUse), lv...)
		ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(st.Waiting), lv...)
		ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(st.Refused), lv...)
	}
}
