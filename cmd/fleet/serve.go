package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/gateway"
	"github.com/fleetrpc/fleet/internal/demo"
	fleetprom "github.com/fleetrpc/fleet/observability/prometheus"
	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/selector"
	"github.com/fleetrpc/fleet/server"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// serveFlags are demo's --serve flags.
type serveFlags struct {
	serve     bool
	addr      string // first server's address; the others take the next ports
	adminAddr string
	// registryAddr is the embedded etcd's client address (without
	// --registry); defaultRegistryAddr by default.
	registryAddr string
	load         int  // calls per second from an XClient; 0: none
	pprof        bool // serve /debug/pprof/ on the admin endpoint
}

// defaultRegistryAddr is where `demo --serve` listens its embedded etcd
// by default (etcd's usual client port), and so where `fleet dashboard`
// looks without --registry.
const defaultRegistryAddr = "127.0.0.1:2379"

// playground is the running `demo --serve`: a registry, three servers
// publishing Arith and Hello, an admin endpoint, and optional load.
type playground struct {
	b        *registryBackend
	servers  []*server.Server
	regs     []registry.Registrar
	addrs    []string
	done     []chan struct{}
	admin    *fleetprom.Admin
	x        *client.XClient
	stopLoad context.CancelFunc
	loadWG   sync.WaitGroup
	// token is the admin token: fleet.Admin on the servers needs it
	// ($FLEET_TOKEN, else random).
	token string
	stats loadStats // the load's outcomes, for reportLoad
}

// serveAddrs returns the three servers' listen addresses: addr and the
// next two ports, or three kernel-chosen ports when addr's port is 0.
func serveAddrs(addr string) ([]string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--addr %q: %w", addr, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65533 {
		return nil, fmt.Errorf("--addr %q: bad port", addr)
	}
	out := make([]string, 3)
	for i := range out {
		if p == 0 {
			out[i] = net.JoinHostPort(host, "0")
		} else {
			out[i] = net.JoinHostPort(host, strconv.Itoa(p+i))
		}
	}
	return out, nil
}

// startPlayground starts everything; stop undoes it.
func startPlayground(ctx context.Context, f demoFlags) (pg *playground, err error) {
	addrs, err := serveAddrs(f.srv.addr)
	if err != nil {
		return nil, err
	}
	pg = &playground{token: os.Getenv(tokenEnv)}
	if pg.token == "" {
		pg.token = newToken()
	}
	// The error returns set pg to nil: undo what was started through a
	// copy of the pointer.
	started := pg
	defer func() {
		if err != nil {
			started.stop()
		}
	}()
	if pg.b, err = openRegistry(f.registry, f.srv.registryAddr); err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	health := map[string]*server.Server{}
	var openapi func() ([]byte, error) // the first server's HTTP/JSON routes
	for i, addr := range addrs {
		lis, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, err
		}
		at := lis.Addr().String()
		sm := fleetprom.NewServerMetrics(fleetprom.WithConstLabels(prometheus.Labels{"instance": at}))
		if err := reg.Register(sm); err != nil {
			lis.Close()
			return nil, err
		}
		srv := server.New(server.WithLogger(quietLogger()), sm.Option(), server.WithAuth(adminAuth(pg.token)))
		if err := registerBuiltins(srv, true); err != nil {
			lis.Close()
			return nil, err
		}
		if err := srv.Register(demo.Arith{}); err != nil {
			lis.Close()
			return nil, err
		}
		if err := srv.Register(&demo.Hello{}); err != nil {
			lis.Close()
			return nil, err
		}
		// The gateway answers gRPC, HTTP/JSON and JSON-RPC 2.0 on the same
		// port; srv.Shutdown stops it too.
		gw := gateway.New(srv, gateway.WithLogger(quietLogger()))
		if openapi == nil {
			openapi = func() ([]byte, error) { return gw.OpenAPI(gateway.OpenAPIConfig{ServerURL: "http://" + at}) }
		}
		done := make(chan struct{})
		go func() { defer close(done); gw.Serve(lis) }()
		pg.servers, pg.addrs, pg.done = append(pg.servers, srv), append(pg.addrs, at), append(pg.done, done)
		health[at] = srv
		r, err := pg.b.newRegistrar()
		if err != nil {
			return nil, err
		}
		pg.regs = append(pg.regs, r)
		for _, svc := range []string{"Arith", "Hello"} {
			in := registry.Instance{Service: svc, Addr: at, Weight: i + 1, Group: "demo", Version: "1"}
			if err := srv.Publish(ctx, r, in, server.PublishConfig{LoadInterval: time.Second, DrainDelay: 300 * time.Millisecond}); err != nil {
				return nil, err
			}
		}
	}
	if pg.admin, err = fleetprom.ListenAdmin(f.srv.adminAddr, fleetprom.AdminConfig{Gatherer: reg, Servers: health, Pprof: f.srv.pprof, OpenAPI: openapi}); err != nil {
		return nil, err
	}
	if f.srv.load > 0 {
		cm := fleetprom.NewClientMetrics()
		reg.MustRegister(cm)
		sel, err := selector.New(f.selector, selector.Config{})
		if err != nil {
			return nil, err
		}
		mode, err := client.ParseFailMode(f.failMode)
		if err != nil {
			return nil, err
		}
		if pg.x, err = client.NewXClient("Arith", pg.b.discovery, client.WithSelector(sel), client.WithFailMode(mode),
			client.WithIdempotent("Add", "Mul", "Div"), client.WithFilters(selector.ByGroup("demo")), cm.XOption()); err != nil {
			return nil, err
		}
		pg.startLoad(f.srv.load)
	}
	return pg, nil
}

// startLoad makes about n Arith.Add calls per second from 32 workers; a
// tick that finds every worker busy is skipped (the load never queues).
func (pg *playground) startLoad(n int) {
	ctx, cancel := context.WithCancel(context.Background())
	pg.stopLoad = cancel
	jobs := make(chan struct{}, 32)
	for w := 0; w < 32; w++ {
		pg.loadWG.Add(1)
		go func() {
			defer pg.loadWG.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case <-jobs:
					cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
					var sum int
					err := pg.x.Call(cctx, "Add", &demo.Args{A: 1, B: 2}, &sum)
					ccancel()
					if ctx.Err() == nil { // not stopped meanwhile
						pg.stats.record(err)
					}
				}
			}
		}()
	}
	pg.loadWG.Add(1)
	go func() {
		defer pg.loadWG.Done()
		t := time.NewTicker(max(time.Second/time.Duration(n), 100*time.Microsecond))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				select {
				case jobs <- struct{}{}:
				default:
				}
			}
		}
	}()
}

// stop shuts down gracefully: load first, then each server (deregistering
// before it drains), the admin endpoint and the registry.
func (pg *playground) stop() {
	if pg.stopLoad != nil {
		pg.stopLoad()
		pg.loadWG.Wait()
	}
	if pg.x != nil {
		pg.x.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i, srv := range pg.servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			srv.Shutdown(ctx)
			<-pg.done[i]
		}()
	}
	wg.Wait()
	for _, r := range pg.regs {
		r.Close()
	}
	if pg.admin != nil {
		pg.admin.Close()
	}
	if pg.b != nil {
		pg.b.close()
	}
}

// runServe runs `fleet demo --serve` until SIGINT or SIGTERM (or ctx ends).
func runServe(ctx context.Context, f demoFlags, stdout io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if f.srv.load < 0 {
		return fmt.Errorf("--load %d: want 0 or more calls/s", f.srv.load)
	}
	ctx, stopSignals := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	pg, err := startPlayground(ctx, f)
	if err != nil {
		return err
	}
	paths := "/metrics /healthz /readyz"
	if f.srv.pprof {
		paths += " /debug/pprof/"
	}
	tokenAt := "set $" + tokenEnv + " or pass --token to fleet call and fleet dashboard"
	remove, err := writeTokenFile(demoTokenPath(), pg.token)
	if err == nil {
		tokenAt = "written to " + demoTokenPath() + ", where fleet call and fleet dashboard read it"
	}
	defer remove()
	fmt.Fprintf(stdout, "registry: %s (%s)\nservers (Arith, Hello; native, gRPC, HTTP/JSON, JSON-RPC 2.0): %v\nadmin: http://%s/ %s\nadmin token (fleet.Admin): %s (%s)\nload: %d calls/s of Arith.Add\nCtrl-C stops.\n",
		pg.b.url, pg.b.name, pg.addrs, pg.admin.Addr(), paths, pg.token, tokenAt, f.srv.load)
	reported := make(chan struct{})
	go func() {
		defer close(reported)
		if f.srv.load > 0 {
			pg.reportLoad(ctx, stdout, loadReportInterval)
		}
	}()
	<-ctx.Done()
	<-reported // stdout is written by one goroutine at a time
	fmt.Fprintln(stdout, "shutting down")
	pg.stop()
	return nil
}
