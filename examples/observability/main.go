// Command observability serves Prometheus metrics on /metrics, traces calls
// with OpenTelemetry and writes an access log, then scrapes its own
// /metrics and prints what a call left in each.
package main

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/observability/accesslog"
	fleetotel "github.com/fleetrpc/fleet/observability/otel"
	fleetprom "github.com/fleetrpc/fleet/observability/prometheus"
	"github.com/fleetrpc/fleet/server"
)

// Args are the arguments of Arith.Add.
type Args struct{ A, B int }

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	// Tracing: an SDK tracer provider; here spans go to memory, in
	// production to an OTLP exporter (sdktrace.WithBatcher(exporter)).
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer tp.Shutdown(context.Background())
	tel := fleetotel.New(fleetotel.WithTracerProvider(tp))

	// Metrics: one collector per side, registered with a registry.
	reg := prometheus.NewRegistry()
	sm := fleetprom.NewServerMetrics()
	cm := fleetprom.NewClientMetrics()
	reg.MustRegister(sm, cm)

	// Access log: one slog record per call (time, duration, peer and trace id
	// dropped here so that the output is the same on every run).
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == "duration" || a.Key == "peer" || a.Key == "trace_id" {
				return slog.Attr{}
			}
			return a
		},
	}))

	// Order: tracing, then metrics, then the log, on both sides.
	srv := server.New(tel.ServerOption(), sm.Option(), server.WithInterceptor(accesslog.Server(logger)))
	err := server.Handle(srv, "Arith", "Add", func(ctx context.Context, args *Args, reply *int) error {
		*reply = args.A + args.B
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go srv.Serve(lis)
	defer srv.Shutdown(context.Background())

	// /metrics, /healthz and /readyz on their own loopback listener
	// (":0" here; the default is 127.0.0.1:9464).
	admin, err := fleetprom.ListenAdmin("127.0.0.1:0", fleetprom.AdminConfig{
		Gatherer: reg,
		Servers:  map[string]*server.Server{"arith": srv},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer admin.Close()

	c, err := client.Dial(ctx, "tcp", lis.Addr().String(), tel.ClientOption(), cm.Option())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	var sum int
	if err := c.Call(ctx, "Arith", "Add", &Args{A: 1, B: 2}, &sum); err != nil {
		log.Fatal(err)
	}
	fmt.Println("sum:", sum)

	for _, s := range spans.GetSpans() {
		fmt.Println("span:", s.Name, s.SpanKind)
	}
	for _, line := range scrape(ctx, "http://"+admin.Addr().String()+"/metrics") {
		fmt.Println("metric:", line)
	}
}

// scrape returns the handled-calls counters of the page at url.
func scrape(ctx context.Context, url string) []string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		log.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	var out []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "fleet_server_handled_total{") || strings.HasPrefix(sc.Text(), "fleet_client_handled_total{") {
			out = append(out, sc.Text())
		}
	}
	return out
}
