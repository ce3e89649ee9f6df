// Package fleetprom exports Prometheus metrics for Fleet servers and
// clients (github.com/prometheus/client_golang).
//
// Import it as
//
//	import fleetprom "github.com/fleetrpc/fleet/observability/prometheus"
//
// Server side, one option installs everything:
//
//	sm := fleetprom.NewServerMetrics()
//	prometheus.MustRegister(sm)
//	srv := server.New(sm.Option())
//
// Client side, one interceptor:
//
//	cm := fleetprom.NewClientMetrics()
//	prometheus.MustRegister(cm)
//	c, err := client.Dial(ctx, "tcp", addr, cm.Option())
//	x, err := client.NewXClient("Arith", disc, cm.XOption())
//
// The metric names and labels follow go-grpc-middleware's Prometheus
// provider (grpc_server_handled_total becomes fleet_server_handled_total,
// with the labels service, method and code instead of grpc_service,
// grpc_method and grpc_code), so dashboards built for gRPC carry over with
// a rename. The code label holds fleet.Code names ("ok", "not_found",
// "deadline_exceeded", ...). Handling-time histograms have both classic
// buckets (WithBuckets, default prometheus.DefBuckets) and a native
// histogram (factor 1.1), so a Prometheus scraping with native histograms
// enabled gets the high-resolution form and others the classic one.
// docs/observability.md lists every metric with its type, labels and
// meaning.
//
// Label values come only from registered methods on the server; calls the
// server refuses before dispatch (unknown method, shutdown, concurrency
// cap) are counted by code alone, since their names are the caller's
// choice. On the client the labels are the service and method the program
// calls.
//
// NewAdmissionCollector exports a server's admission stages, and
// NewPolicyCollector the traffic policy each policy.Watcher has in force
// (through the PolicyStats interface, so this module does not import the
// policy module). AdminHandler and ListenAdmin serve /metrics, /healthz,
// /readyz and, when configured, /debug/pprof/, /openapi.json and /policy.
//
// Both ServerMetrics and ClientMetrics are prometheus.Collector values:
// register each with one registry. They are safe for concurrent use; the
// per-call cost is a few atomic adds and one copy-on-write map lookup, no
// allocation once a method's series exist.
package fleetprom
