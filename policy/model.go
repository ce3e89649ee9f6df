package policy

import (
	"encoding/json"
	"fmt"
	"time"
)

// APIVersion is the schema version of the documents this package reads.
// A Document whose APIVersion is empty is read as this one.
const APIVersion = "fleet.policy/v1"

// Document is one service's traffic policy, the unit a source stores
// under one key. Its semantics follow xDS's RouteConfiguration (Envoy,
// gRPC xDS): the routes are tried in order and the first whose Match
// accepts the call decides its destination, timeout, retries, hedging and
// faults; a call no route matches keeps the client's code defaults. Limits
// are the servers' per-method admission limits.
//
// A Document is plain data: decode it with Parse, check it with Compile
// (which Parse calls), encode it with MarshalJSON or MarshalYAML.
type Document struct {
	// APIVersion is the schema, "fleet.policy/v1" (the default).
	APIVersion string `json:"apiVersion,omitempty"`
	// Version names this revision of the policy (any non-empty string,
	// such as "42" or "2024-canary-5"); clients and servers report the
	// version they run. Required.
	Version string `json:"version"`
	// Service is the service the policy governs. Required.
	Service string `json:"service"`
	// Subsets name groups of the service's instances, for routes'
	// destinations.
	Subsets []Subset `json:"subsets,omitempty"`
	// Routes are tried in order; the first that matches a call applies.
	Routes []Route `json:"routes,omitempty"`
	// Limits are per-method server admission limits.
	Limits []MethodLimit `json:"limits,omitempty"`
}

// Subset is a named group of instances: those that carry every one of Tags
// and, when set, the Version and Group (registry.Instance fields; xDS's
// cluster subsets by endpoint metadata). An empty Subset holds every
// instance.
type Subset struct {
	Name    string   `json:"name"`
	Tags    []string `json:"tags,omitempty"`
	Version string   `json:"version,omitempty"`
	Group   string   `json:"group,omitempty"`
}

// Route is one rule: the calls it matches and what applies to them.
type Route struct {
	// Name labels the route in errors and reports. Optional.
	Name  string `json:"name,omitempty"`
	Match Match  `json:"match,omitzero"`
	// Destinations split the matched calls between subsets by weight
	// (xDS weighted_clusters); the weights must sum to 100. Empty: every
	// instance.
	Destinations []Destination `json:"destinations,omitempty"`
	// Timeout bounds each matched call, every attempt included (xDS
	// route timeout). 0: the caller's deadline only.
	Timeout Duration `json:"timeout,omitempty"`
	// Retry replaces the client's retry settings for the matched calls.
	Retry *Retry `json:"retry,omitempty"`
	// Hedge sends the matched calls to several servers in turn.
	// Exclusive with Retry (as in gRPC service config).
	Hedge *Hedge `json:"hedge,omitempty"`
	// Fault injects delays and aborts into the matched calls' attempts.
	Fault *Fault `json:"fault,omitempty"`
	// Breaker sets the circuit-breaker thresholds of the matched calls.
	Breaker *Breaker `json:"breaker,omitempty"`
}

// Match selects calls. Every set condition must hold; the zero Match
// matches every call.
type Match struct {
	// Method is the method's name, exact. Empty: any method.
	Method string `json:"method,omitempty"`
	// Headers are conditions on the call's request metadata.
	Headers []HeaderMatch `json:"headers,omitempty"`
	// Percent, when set, matches only that share of the calls the other
	// conditions match, chosen at random per call, 0 to 100 (xDS
	// runtime_fraction).
	Percent *float64 `json:"percent,omitempty"`
}

// HeaderMatch is a condition on one request metadata key. Exactly one of
// Exact, Prefix, Regex and Present is set; Invert negates the result (xDS
// HeaderMatcher).
type HeaderMatch struct {
	Name   string `json:"name"`
	Exact  string `json:"exact,omitempty"`
	Prefix string `json:"prefix,omitempty"`
	// Regex is an RE2 expression (Go's regexp) the whole value must
	// match.
	Regex string `json:"regex,omitempty"`
	// Present: the key is there, whatever its value.
	Present bool `json:"present,omitempty"`
	Invert  bool `json:"invert,omitempty"`
}

// Destination is one share of a route's traffic.
type Destination struct {
	// Subset names one of the Document's subsets.
	Subset string `json:"subset"`
	// Weight is the share, 0 to 100, of the route's calls.
	Weight int `json:"weight"`
}

// Retry is a retry policy (gRPC's retryPolicy, Envoy's RetryPolicy). A
// retry policy always carries a budget, so that retries cannot multiply
// the load of a failing service.
type Retry struct {
	// Attempts bounds the attempts of a call, the first included: 1 to
	// 10.
	Attempts int `json:"attempts"`
	// RetryOn lists the fleet.Code names ("unavailable", "deadline_exceeded",
	// ...) retried besides the calls that certainly did not run, which
	// are always retried.
	RetryOn []string `json:"retryOn,omitempty"`
	// Backoff is the full-jitter backoff between attempts; zero keeps the
	// client's.
	Backoff Backoff `json:"backoff,omitzero"`
	// Budget bounds the retries. Required when Attempts > 1.
	Budget *Budget `json:"budget,omitempty"`
}

// Backoff is exponential backoff with full jitter: before retry k, a
// random time in [0, min(Max, Base·2^(k-1))].
type Backoff struct {
	Base Duration `json:"base,omitempty"`
	Max  Duration `json:"max,omitempty"`
}

// Budget bounds retries to a share of calls over a sliding window
// (client.RetryBudget; Envoy's retry budget, gRPC's retry throttling).
type Budget struct {
	// Percent of the calls over Window that may be retried, 0 to 100.
	Percent float64 `json:"percent"`
	// MinRetries per window are always allowed. Default 10.
	MinRetries *int `json:"minRetries,omitempty"`
	// Window is the sliding window. Default 10s.
	Window Duration `json:"window,omitempty"`
}

// Hedge sends a call to up to Attempts servers, one more every Delay
// until one answers (gRPC's hedgingPolicy).
type Hedge struct {
	// Attempts: 2 to 5.
	Attempts int `json:"attempts"`
	// Delay between sends; positive.
	Delay Duration `json:"delay"`
}

// Fault injects faults before each attempt of the matched calls, on the
// client (xDS HTTPFault): a delay, then perhaps an abort, each drawn
// independently per attempt.
type Fault struct {
	Delay *FaultDelay `json:"delay,omitempty"`
	Abort *FaultAbort `json:"abort,omitempty"`
}

// FaultDelay delays Percent of the attempts by Duration.
type FaultDelay struct {
	Duration Duration `json:"duration"`
	Percent  float64  `json:"percent"`
}

// FaultAbort fails Percent of the attempts with Code (a fleet.Code name)
// without sending them.
type FaultAbort struct {
	Code    string  `json:"code"`
	Percent float64 `json:"percent"`
}

// Breaker is a route's circuit-breaker thresholds, applied on the client
// (client.CallPolicy.Breaker over client.BreakerSettings; a breaker per
// server and per route as Kitex's per-method breakers, with the
// per-host counting of Envoy's outlier detection). Each server keeps a
// breaker per distinct setting, which only the calls of routes with that
// setting go through: it opens after Failures consecutive server
// failures of those calls on that server (answers with code
// unavailable, shutting_down, deadline_exceeded or internal), so the
// server is skipped for them for OpenFor; then it lets Probes calls
// through: that many successes close it, one failure opens it again.
// The breaker is the classic three-state machine (Nygard, "Release
// It!"), github.com/sony/gobreaker.
//
// A zero field takes the client's own setting (client.WithBreaker; by
// default 5 failures, 5s, 1 probe, never reset). A setting equal to the
// client's own uses each server's own breaker. A breaker keeps its state
// across policy changes for as long as a route carries its setting; a
// changed setting starts a new, closed breaker on the next call.
type Breaker struct {
	// Failures is the number of consecutive server failures that opens
	// a server's breaker: 1 to 1000. 0: the client's.
	Failures int `json:"failures,omitempty"`
	// OpenFor is how long an open breaker skips its server before it
	// lets probes through: up to 1h. 0: the client's.
	OpenFor Duration `json:"openFor,omitempty"`
	// Probes is how many calls a half-open breaker lets through: 1 to
	// 100. 0: the client's.
	Probes int `json:"probes,omitempty"`
	// ResetEvery clears a closed breaker's counts at this interval: up
	// to 1h. 0: the client's.
	ResetEvery Duration `json:"resetEvery,omitempty"`
	// Disabled turns the breaker off for the matched calls: their
	// failures are not counted and no server is skipped for them.
	// Exclusive with the other fields.
	Disabled bool `json:"disabled,omitempty"`
}

// MethodLimit is a server's admission limit for one method.
type MethodLimit struct {
	Method string `json:"method"`
	// Rate is the sustained calls per second admitted; 0: unlimited.
	Rate float64 `json:"rate,omitempty"`
	// Burst is the token bucket's depth; 0: 1 when Rate is set.
	Burst int `json:"burst,omitempty"`
	// MaxConcurrent bounds the calls running at once; 0: unlimited.
	MaxConcurrent int `json:"maxConcurrent,omitempty"`
}

// Duration is a time.Duration encoded as Go's duration string ("250ms",
// "2s"); a JSON number is read as nanoseconds.
type Duration time.Duration

// MarshalJSON encodes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string or a number of nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n int64
		if err := json.Unmarshal(b, &n); err != nil {
			return fmt.Errorf("duration: want a string such as \"250ms\", got %s", b)
		}
		*d = Duration(n)
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	*d = Duration(v)
	return nil
}

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }
