package fleetprom

import (
	"encoding/json"
	"slices"
	"strings"
	"sync"

	"github.com/fleetrpc/fleet"
	"github.com/prometheus/client_golang/prometheus"
)

// PolicyStats is a traffic-policy watcher as PolicyCollector and the
// admin endpoint's /policy route read it. *policy.Watcher (module
// github.com/fleetrpc/fleet/policy) satisfies it, so this module does not
// import the policy module. Implementations are safe for concurrent use.
type PolicyStats interface {
	// PolicyStatus returns the service the policy governs, the version in
	// force ("" when none), and the counts of documents applied
	// (deletions included) and refused as invalid since the watcher
	// started.
	PolicyStatus() (service, version string, applied, refused int64)
	// MarshalJSON returns what /policy serves for the service: a JSON
	// object (*policy.Watcher's holds the document in force and why the
	// last refused one was refused).
	json.Marshaler
}

// PolicyCollector exports, at each scrape, the traffic policy each of its
// watchers has in force, labelled by service:
//
//	fleet_policy_version{service, version}  gauge    1 for the version in force; 0 with version="" when none
//	fleet_policy_applied_total{service}     counter  documents applied (deletions included)
//	fleet_policy_refused_total{service}     counter  documents refused as invalid (the last good policy stayed)
//
// The version is a label because policy versions are strings; one series
// per service exists at a time, so its cardinality is the number of
// services. Why a document was refused is not a label: /policy on the
// admin endpoint (AdminConfig.Policies) and the watcher's Warn log say it.
// Safe for concurrent use; register it with one registry.
type PolicyCollector struct {
	version, applied, refused *prometheus.Desc

	mu       sync.Mutex
	watchers []PolicyStats
}

// NewPolicyCollector returns the collector of the watchers ws (more can be
// added with Add), with constLabels (may be nil) on every series. It
// panics, as prometheus.MustRegister does, when two watchers govern the
// same service.
func NewPolicyCollector(constLabels prometheus.Labels, ws ...PolicyStats) *PolicyCollector {
	c := &PolicyCollector{
		version: prometheus.NewDesc("fleet_policy_version",
			"Traffic policy version in force for a service: 1 on the series of the version in force, 0 with version=\"\" when no policy is in force.",
			[]string{"service", "version"}, constLabels),
		applied: prometheus.NewDesc("fleet_policy_applied_total",
			"Traffic policy documents applied for a service, deletions included.",
			[]string{"service"}, constLabels),
		refused: prometheus.NewDesc("fleet_policy_refused_total",
			"Traffic policy documents refused as invalid for a service; the last good policy stayed in force.",
			[]string{"service"}, constLabels),
	}
	if err := c.Add(ws...); err != nil {
		panic(err)
	}
	return c
}

// Add adds watchers to export. It returns an error with code
// AlreadyExists, adding none, when one governs a service another watcher
// (added or in ws) already does: their series would collide.
func (c *PolicyCollector) Add(ws ...PolicyStats) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := map[string]bool{}
	for _, w := range c.watchers {
		svc, _, _, _ := w.PolicyStatus()
		seen[svc] = true
	}
	for _, w := range ws {
		svc, _, _, _ := w.PolicyStatus()
		if seen[svc] {
			return fleet.Errorf(fleet.AlreadyExists, "fleetprom: a policy watcher for service %q is already exported", svc)
		}
		seen[svc] = true
	}
	c.watchers = append(c.watchers, ws...)
	return nil
}

// Watchers returns the watchers exported, ordered by service.
func (c *PolicyCollector) Watchers() []PolicyStats {
	c.mu.Lock()
	ws := slices.Clone(c.watchers)
	c.mu.Unlock()
	return sortPolicies(ws)
}

// Describe implements prometheus.Collector.
func (c *PolicyCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.version
	ch <- c.applied
	ch <- c.refused
}

// Collect implements prometheus.Collector.
func (c *PolicyCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	ws := slices.Clone(c.watchers)
	c.mu.Unlock()
	for _, w := range ws {
		svc, ver, applied, refused := w.PolicyStatus()
		in := 0.0
		if ver != "" {
			in = 1
		}
		ch <- prometheus.MustNewConstMetric(c.version, prometheus.GaugeValue, in, svc, ver)
		ch <- prometheus.MustNewConstMetric(c.applied, prometheus.CounterValue, float64(applied), svc)
		ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(refused), svc)
	}
}

// sortPolicies orders ws by service, in place, and returns it.
func sortPolicies(ws []PolicyStats) []PolicyStats {
	slices.SortStableFunc(ws, func(a, b PolicyStats) int {
		sa, _, _, _ := a.PolicyStatus()
		sb, _, _, _ := b.PolicyStatus()
		return strings.Compare(sa, sb)
	})
	return ws
}
