package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/gateway"
	"github.com/fleetrpc/fleet/internal/benchpb"
	"github.com/fleetrpc/fleet/internal/demo"
	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/selector"
	"github.com/fleetrpc/fleet/server"
	"github.com/fleetrpc/fleet/server/admin"
	"github.com/fleetrpc/fleet/server/health"
	"github.com/fleetrpc/fleet/server/reflection"
	"github.com/spf13/cobra"
)

type demoFlags struct {
	calls, callers int
	json           bool
	selector       string
	failMode       string
	registry       string
	noKill         bool
	network        string
	canary, fault  bool
	srv            serveFlags
}

func init() {
	var f demoFlags
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Three servers in a registry, a client that survives one of them crashing",
		Long: `demo is Fleet end to end on loopback. It starts a registry (an in-process
etcd, or the one --registry names), three servers with the services Arith
(Add, Mul, Div; net/rpc form) and Hello.Say (the 581-byte BenchmarkMessage)
registering into it with weights 1, 2 and 3, and a client that discovers
them. The client checks Arith, then makes --calls calls of Hello.Say from
--callers concurrent callers, checking every reply. A third of the way
through, one server is killed abruptly: listener and connections closed,
no deregistration. It prints calls, errors, calls/s, latency and the calls
each server served. The exit status is 1 if any call failed.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.srv.serve {
				return runServe(cmd.Context(), f, os.Stdout)
			}
			if f.canary || f.fault {
				return runCanary(cmd.Context(), f, os.Stdout, os.Stderr)
			}
			return runDemo(cmd.Context(), f, os.Stdout, os.Stderr)
		},
	}
	fl := cmd.Flags()
	fl.IntVarP(&f.calls, "calls", "n", 100_000, "number of Hello.Say calls")
	fl.IntVarP(&f.callers, "callers", "c", 100, "concurrent callers")
	fl.BoolVar(&f.json, "json", false, "print the result as one JSON object")
	fl.StringVar(&f.selector, "selector", "weighted", "selector: "+strings.Join(selector.Names(), ", "))
	fl.StringVar(&f.failMode, "failmode", "failover", "fail mode: failover, failfast, failtry, failbackup")
	fl.StringVar(&f.registry, "registry", "", "external registry URL (etcd://, zookeeper://, redis://, nats://host:port); default: an in-process etcd")
	fl.BoolVar(&f.noKill, "no-kill", false, "do not kill a server during the run")
	fl.StringVar(&f.network, "network", "tcp", "transport between the client and the servers: tcp, kcp, quic")
	fl.BoolVar(&f.canary, "canary", false, "canary release instead: two v1 and two v2 servers of Hello; the policy held in the registry moves 0%, 5%, 50% and 100% of the calls to v2, then puts an invalid policy, refused while the last good one stays; --calls spread over the five steps; prints the share v2 served at each step and the policy metrics")
	fl.BoolVar(&f.fault, "fault", false, "with --canary (implied): also abort 10% of Hello.Say's attempts with unavailable through the policy, and retry them (up to 8 attempts: a call fails only if all 8 are aborted, one in 10^8)")
	fl.BoolVar(&f.srv.serve, "serve", false, "keep the registry and the three servers running until SIGINT or SIGTERM, with an admin endpoint (/metrics, /healthz, /readyz); fleet.Admin on the servers needs the admin token it prints ($FLEET_TOKEN, else random)")
	fl.StringVar(&f.srv.addr, "addr", "127.0.0.1:8972", "with --serve: the first server's address; the others listen on the next two ports (port 0: three random ports)")
	fl.StringVar(&f.srv.adminAddr, "admin-addr", "127.0.0.1:9464", "with --serve: the admin endpoint's address (loopback only)")
	fl.StringVar(&f.srv.registryAddr, "registry-addr", defaultRegistryAddr, "with --serve and no --registry: the embedded etcd's client address, where fleet dashboard looks by default (port 0: a random port)")
	fl.BoolVar(&f.srv.pprof, "pprof", false, "with --serve: serve /debug/pprof/ (profiles and the command line) on the admin endpoint")
	fl.IntVar(&f.srv.load, "load", 0, "with --serve: calls/s of Arith.Add from an XClient (0: none)")
	rootCmd.AddCommand(cmd)
}

// demoServer is one of the demo's servers.
type demoServer struct {
	srv   *server.Server
	reg   registry.Registrar
	hello *demo.Hello
	addr  string
	done  chan struct{}
}

// registerBuiltins serves fleet.Health and fleet.Reflection on srv, so
// that health checks and `fleet list`, `describe` and `call` work against
// it, and fleet.Admin (for the dashboard's steering) when steer is set.
func registerBuiltins(srv *server.Server, steer bool) error {
	if err := health.Register(srv); err != nil {
		return err
	}
	if err := reflection.RegisterWith(srv, reflection.Config{GoTypes: gateway.GoTypeDescriptor}); err != nil {
		return err
	}
	if steer {
		return admin.Register(srv, admin.Config{Logger: quietLogger()})
	}
	return nil
}

func startDemoServer(ctx context.Context, b *registryBackend, weight int, network string) (*demoServer, error) {
	d := &demoServer{srv: server.New(server.WithLogger(quietLogger())), hello: &demo.Hello{}, done: make(chan struct{})}
	if err := registerBuiltins(d.srv, false); err != nil {
		return nil, err
	}
	if err := d.srv.Register(demo.Arith{}); err != nil {
		return nil, err
	}
	if err := d.srv.Register(d.hello); err != nil {
		return nil, err
	}
	lis, err := d.srv.Listen(network, "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	d.addr = lis.Addr().String()
	go func() { defer close(d.done); d.srv.Serve(lis) }()
	if d.reg, err = b.newRegistrar(); err != nil {
		d.srv.Close()
		return nil, err
	}
	for _, svc := range []string{"Hello", "Arith"} {
		in := registry.Instance{Service: svc, Addr: d.addr, Network: network, Weight: weight, Group: "demo", Version: "1"}
		if err := d.srv.Publish(ctx, d.reg, in, server.PublishConfig{LoadInterval: time.Second, DrainDelay: 300 * time.Millisecond}); err != nil {
			d.srv.Close()
			return nil, err
		}
	}
	return d, nil
}

// kill stops the server as a crash would: no deregistration, the
// registry record lives until its TTL runs out.
func (d *demoServer) kill() {
	d.srv.Close()
	d.reg.Close()
}

func runDemo(ctx context.Context, f demoFlags, stdout, stderr io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	sel, err := selector.New(f.selector, selector.Config{})
	if err != nil {
		return err
	}
	mode, err := client.ParseFailMode(f.failMode)
	if err != nil {
		return err
	}
	network, err := setupNetwork(f.network)
	if err != nil {
		return err
	}
	b, err := openRegistry(f.registry, "")
	if err != nil {
		return err
	}
	defer b.close()

	var servers []*demoServer
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, d := range servers {
			d.srv.Shutdown(sctx)
			d.reg.Close()
		}
	}()
	for w := 1; w <= 3; w++ {
		d, err := startDemoServer(ctx, b, w, network)
		if err != nil {
			return err
		}
		servers = append(servers, d)
	}

	xopts := []client.XOption{client.WithFailMode(mode), client.WithIdempotent("Say", "Add", "Mul", "Div"),
		client.WithFilters(selector.ByGroup("demo"))}
	arith, err := client.NewXClient("Arith", b.discovery, xopts...)
	if err != nil {
		return err
	}
	defer arith.Close()
	x, err := client.NewXClient("Hello", b.discovery, append(xopts, client.WithSelector(sel))...)
	if err != nil {
		return err
	}
	defer x.Close()
	if err := waitServers(ctx, x, len(servers)); err != nil {
		return err
	}
	if err := checkArith(ctx, func(ctx context.Context, _, method string, args, reply any) error {
		return arith.Call(ctx, method, args, reply)
	}); err != nil {
		return err
	}

	if !f.json {
		fmt.Fprintf(stderr, "registry: %s; network %s; servers: %s (weights 1, 2, 3); selector %s, fail mode %s\n",
			b.name, network, strings.Join(x.Servers(), ", "), f.selector, f.failMode)
	}
	victim := servers[1]
	var killOnce sync.Once
	killAt := int64(f.calls / 3)
	prog := progress(stderr, f.calls, f.json)
	args := benchpb.New()
	res := demo.Run(ctx, f.calls, f.callers, func(ctx context.Context) error {
		var reply benchpb.BenchmarkMessage
		if err := x.Call(ctx, "Say", args, &reply); err != nil {
			return err
		}
		return demo.CheckReply(args, &reply)
	}, func(done int64) {
		if !f.noKill && done == killAt {
			killOnce.Do(func() {
				victim.kill()
				msg := fmt.Sprintf("killed %s after %d calls", victim.addr, done)
				switch {
				case prog != nil:
					prog.println(msg)
				case !f.json:
					fmt.Fprintln(stderr, msg)
				}
			})
		}
		prog.update(done)
	})
	res.PerServer = map[string]int64{}
	for _, d := range servers {
		res.PerServer[d.addr] = d.hello.Served.Load()
	}
	return report(stdout, res, f.json, b.name)
}

// waitServers waits until the client lists n servers (bounded by 10 s).
func waitServers(ctx context.Context, x *client.XClient, n int) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for len(x.Servers()) < n {
		select {
		case <-ctx.Done():
			return fmt.Errorf("discovery lists %d of %d servers after 10s", len(x.Servers()), n)
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

type callFunc func(ctx context.Context, service, method string, args, reply any) error

// checkArith calls Arith's three methods and checks their answers,
// including Div's divide-by-zero error.
func checkArith(ctx context.Context, call callFunc) error {
	var sum, prod, quo int
	if err := call(ctx, "Arith", "Add", &demo.Args{A: 7, B: 8}, &sum); err != nil || sum != 15 {
		return fmt.Errorf("Arith.Add(7, 8) = %d, %v", sum, err)
	}
	if err := call(ctx, "Arith", "Mul", &demo.Args{A: 7, B: 8}, &prod); err != nil || prod != 56 {
		return fmt.Errorf("Arith.Mul(7, 8) = %d, %v", prod, err)
	}
	if err := call(ctx, "Arith", "Div", &demo.Args{A: 56, B: 8}, &quo); err != nil || quo != 7 {
		return fmt.Errorf("Arith.Div(56, 8) = %d, %v", quo, err)
	}
	err := call(ctx, "Arith", "Div", &demo.Args{A: 1, B: 0}, &quo)
	var fe *fleet.Error
	if !errors.As(err, &fe) || fe.Message() != demo.ErrDivideByZero.Error() {
		return fmt.Errorf("Arith.Div(1, 0) = %v, want the divide-by-zero error", err)
	}
	return nil
}

// progressLine reports a run's progress on one line of w, rewritten in
// place ("\r") about every tenth of the run. Other messages (println)
// first end that line, so they never run into it, on a terminal or in a
// file. A nil *progressLine reports nothing. Safe for concurrent use.
type progressLine struct {
	mu    sync.Mutex
	w     io.Writer
	total int64
	step  int64
	open  bool // a progress line is written and not yet ended
}

// progress returns the progress reporter of a run of total calls on w, or
// nil when quiet or the run is too short to report.
func progress(w io.Writer, total int, quiet bool) *progressLine {
	if quiet || total < 10 {
		return nil
	}
	return &progressLine{w: w, total: int64(total), step: int64(total / 10)}
}

// update reports done calls.
func (p *progressLine) update(done int64) {
	if p == nil || done%p.step != 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "\r%3d%% (%d/%d calls)", done*100/p.total, done, p.total)
	p.open = true
	if done == p.total {
		fmt.Fprintln(p.w)
		p.open = false
	}
}

// println writes msg on a line of its own, ending the progress line first.
func (p *progressLine) println(msg string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.open {
		fmt.Fprintln(p.w)
		p.open = false
	}
	fmt.Fprintln(p.w, msg)
}

var errCallsFailed = errors.New("some calls failed")

func report(w io.Writer, res demo.Result, asJSON bool, where string) error {
	if asJSON {
		enc := json.NewEncoder(w)
		if err := enc.Encode(res); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(w, "registry:     %s\n", where)
		fmt.Fprintf(w, "calls:        %d\n", res.Calls)
		fmt.Fprintf(w, "errors:       %d\n", res.Errors)
		if res.FirstError != "" {
			fmt.Fprintf(w, "first error:  %s\n", res.FirstError)
		}
		fmt.Fprintf(w, "elapsed:      %v\n", res.Elapsed.Round(time.Millisecond))
		fmt.Fprintf(w, "calls/s:      %.0f\n", res.CallsPerSecond)
		fmt.Fprintf(w, "latency (ms): mean %.3f  p50 %.3f  p99 %.3f  max %.3f\n", res.Latency.Mean, res.Latency.P50, res.Latency.P99, res.Latency.Max)
		addrs := make([]string, 0, len(res.PerServer))
		for addr := range res.PerServer {
			addrs = append(addrs, addr)
		}
		sort.Strings(addrs)
		for _, addr := range addrs {
			fmt.Fprintf(w, "  served by %-22s %d calls\n", addr, res.PerServer[addr])
		}
	}
	if res.Errors > 0 {
		return errCallsFailed
	}
	return nil
}
