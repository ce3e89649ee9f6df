package fleetprom

import (
	"sync"

	"github.com/fleetrpc/fleet/client"
	"github.com/prometheus/client_golang/prometheus"
)

// xMetrics are the XClient governance metrics, fed by client.XObserver.
type xMetrics struct {
	servers *prometheus.GaugeVec   // service
	picks   *prometheus.CounterVec // service, server
	retries *prometheus.CounterVec // service, method
	backups *prometheus.CounterVec // service, method
	breaker *prometheus.GaugeVec   // service, server

	mu    sync.Mutex
	known map[string][]string // service → servers last listed
}

func newXMetrics(cl prometheus.Labels) *xMetrics {
	return &xMetrics{
		servers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fleet_client_servers", ConstLabels: cl,
			Help: "Servers an XClient currently knows for the service, from discovery.",
		}, []string{"service"}),
		picks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleet_client_picks_total", ConstLabels: cl,
			Help: "Times the selector chose the server for an attempt.",
		}, []string{"service", "server"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleet_client_retries_total", ConstLabels: cl,
			Help: "Attempts after the first of Failover and Failtry calls.",
		}, []string{"service", "method"}),
		backups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleet_client_backup_requests_total", ConstLabels: cl,
			Help: "Backup requests sent by Failbackup calls.",
		}, []string{"service", "method"}),
		breaker: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fleet_client_breaker_state", ConstLabels: cl,
			Help: "Circuit-breaker state of the server: 0 closed, 1 half-open, 2 open.",
		}, []string{"service", "server"}),
		known: map[string][]string{},
	}
}

var (
	_ client.XObserver       = (*xMetrics)(nil)
	_ client.BreakerObserver = (*xMetrics)(nil)
)

// OnServers sets the server count and drops the series of servers that
// left, so the per-server label values stay bounded by the servers known.
func (m *xMetrics) OnServers(service string, servers []string) {
	m.servers.WithLabelValues(service).Set(float64(len(servers)))
	now := make(map[string]bool, len(servers))
	for _, s := range servers {
		now[s] = true
		m.breaker.WithLabelValues(service, s) // 0: closed, the initial state
	}
	m.mu.Lock()
	old := m.known[service]
	m.known[service] = servers
	m.mu.Unlock()
	for _, s := range old {
		if !now[s] {
			m.picks.DeleteLabelValues(service, s)
			m.breaker.DeleteLabelValues(service, s)
		}
	}
}

func (m *xMetrics) OnPick(service, server string) { m.picks.WithLabelValues(service, server).Inc() }
func (m *xMetrics) OnRetry(service, method string) {
	m.retries.WithLabelValues(service, method).Inc()
}
func (m *xMetrics) OnBackup(service, method string) {
	m.backups.WithLabelValues(service, method).Inc()
}
func (m *xMetrics) OnBreakerState(service, server string, _, to client.BreakerState) {
	m.breaker.WithLabelValues(service, server).Set(float64(to))
}

func (m *xMetrics) describe(ch chan<- *prometheus.Desc) {
	m.servers.Describe(ch)
	m.picks.Describe(ch)
	m.retries.Describe(ch)
	m.backups.Describe(ch)
	m.breaker.Describe(ch)
}

func (m *xMetrics) collect(ch chan<- prometheus.Metric) {
	m.servers.Collect(ch)
	m.picks.Collect(ch)
	m.retries.Collect(ch)
	m.backups.Collect(ch)
	m.breaker.Collect(ch)
}
