package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fleetrpc/fleet/bench"
	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/registry/etcd"
)

// govOptions configures fleet bench governance.
type govOptions struct {
	Sizes    []govSize     // services x instances per service, run in turn
	Clients  int           // watching clients
	Procs    int           // child processes the clients are spread over
	Watch    int           // services each client watches (at most the services)
	Churn    float64       // instance changes per second
	Duration time.Duration // how long the churn lasts
	Policies int           // policy changes during the churn
	TTL      time.Duration // the instances' lease TTL
	Progress io.Writer     // progress lines; nil: none
	Profile  string        // when set, the clients' CPU profiles go to Profile-<size>-<process>.pprof
}

type govSize struct{ Services, PerService int }

func (s govSize) String() string { return fmt.Sprintf("%dx%d", s.Services, s.PerService) }

func parseSizes(list []string) ([]govSize, error) {
	var out []govSize
	for _, s := range list {
		a, b, ok := strings.Cut(s, "x")
		n, err1 := strconv.Atoi(a)
		m, err2 := strconv.Atoi(b)
		if !ok || err1 != nil || err2 != nil || n < 1 || m < 1 || n > 1000 || m > 1000 {
			return nil, fmt.Errorf("size %q: want SERVICESxINSTANCES, such as 100x50 (each 1 to 1000)", s)
		}
		out = append(out, govSize{n, m})
	}
	return out, nil
}

func governanceCommand() *cobra.Command {
	var (
		o       govOptions
		sizes   []string
		quick   bool
		jsonOut bool
	)
	cmd := &cobra.Command{
		Use:   "governance",
		Short: "Measure discovery and policy updates with many instances and clients on a real etcd",
		Long: `governance runs etcd (in-process, in a child process of this binary, on a
loopback port), registers SERVICES x INSTANCES instances through the etcd
registry (one Registrar per service, one lease per instance, the TTLs
spread over --ttl to 2x --ttl so that the keep-alives do not all come in one
burst, as they would not from servers started at different times) and a
policy document per service, and starts --clients clients spread over --procs child
processes. Each client has its own etcd connection and, for each of the
--watch services it watches, a Discovery watch and a policy.Watcher on the
etcd PolicyStore. Once every client has the full state, instances change at
--churn per second for --duration (updates, removals and additions in turn,
round robin over the services) and --policies policy documents are replaced
meanwhile. It then waits until every client holds the final state and
reports, for each size:

  - the time from each write to etcd's acknowledgement;
  - the time from each write to every client watching the service having
    applied it (p50, p99, max over the writes), for instance changes and
    policy changes, and the same per client;
  - the clients' live heap growth from watching, per instance known (an
    instance watched by two clients is known twice);
  - the clients' CPU per update applied (an instance change seen by one
    client, or a policy applied by one);
  - etcd's load over the churn: puts and deletes/s, consensus proposals/s,
    lease renewals/s, bytes/s received from and sent to its clients, and
    its CPU.

Every phase is bounded in time; the children end with the command. --quick
runs a small size in a few seconds and only checks that every client
converged.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if quick {
				if !cmd.Flags().Changed("sizes") {
					sizes = []string{"4x5"}
				}
				for name, set := range map[string]func(){
					"clients":  func() { o.Clients = 8 },
					"procs":    func() { o.Procs = 2 },
					"watch":    func() { o.Watch = 3 },
					"churn":    func() { o.Churn = 20 },
					"duration": func() { o.Duration = 2 * time.Second },
					"policies": func() { o.Policies = 3 },
				} {
					if !cmd.Flags().Changed(name) {
						set()
					}
				}
			}
			var err error
			if o.Sizes, err = parseSizes(sizes); err != nil {
				return err
			}
			if o.Clients < 1 || o.Procs < 1 || o.Watch < 1 || o.Churn <= 0 || o.Duration <= 0 || o.Policies < 0 {
				return errors.New("--clients, --procs, --watch, --churn and --duration must be positive, --policies not negative")
			}
			o.Procs = min(o.Procs, o.Clients)
			o.Progress = cmd.ErrOrStderr()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			res, err := runGovernance(ctx, o)
			if jsonOut && len(res) > 0 {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if e := enc.Encode(res); e != nil {
					return e
				}
			} else if len(res) > 0 {
				writeGovernance(cmd.OutOrStdout(), res)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&sizes, "sizes", []string{"10x50", "100x5", "100x50"}, "SERVICESxINSTANCES per service, each measured in turn")
	f.IntVar(&o.Clients, "clients", 200, "watching clients, each with its own etcd connection")
	f.IntVar(&o.Procs, "procs", 4, "child processes the clients are spread over")
	f.IntVar(&o.Watch, "watch", 20, "services each client watches (instances and policy)")
	f.Float64Var(&o.Churn, "churn", 50, "instance changes per second")
	f.DurationVar(&o.Duration, "duration", 20*time.Second, "how long the churn lasts")
	f.IntVar(&o.Policies, "policies", 10, "policy documents replaced during the churn, evenly spaced")
	f.DurationVar(&o.TTL, "ttl", time.Minute, "the lease TTL of the first service's instances; service i of S has TTL*(1+i/S), spreading the keep-alives (every TTL/3)")
	f.BoolVar(&quick, "quick", false, "a small run in a few seconds (4x5, 8 clients in 2 processes, 2 s of churn) that checks every client converged")
	f.BoolVar(&jsonOut, "json", false, "print the results as JSON")
	f.StringVar(&o.Profile, "cpuprofile", "", "write each client process's CPU profile of the churn to `PREFIX`-SIZE-N.pprof")
	return cmd
}

// govLatency is the distribution of the time from a write to its
// application, in milliseconds.
type govLatency struct {
	Writes int `json:"writes"`
	// AllP50, AllP99 and AllMax are over the writes, each write's time
	// being the last of its clients to apply it.
	AllP50 float64 `json:"all_p50_ms"`
	AllP99 float64 `json:"all_p99_ms"`
	AllMax float64 `json:"all_max_ms"`
	// P50 and P99 are over every (write, client) pair.
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
	// Missing counts (write, client) pairs never seen applied: a later
	// write to the same instance reached the client first, so the client
	// never held this version.
	Missing int `json:"missing"`
}

// govResult is one size's figures.
type govResult struct {
	Size           string     `json:"size"`
	Instances      int        `json:"instances"`
	Clients        int        `json:"clients"`
	Procs          int        `json:"procs"`
	Watch          int        `json:"watch"`
	KnownPerClient float64    `json:"known_per_client"`
	Seconds        float64    `json:"seconds"`
	ChurnRate      float64    `json:"churn_per_s"`
	Commit         govLatency `json:"commit"` // from a write to etcd's acknowledgement (All* only)
	Instance       govLatency `json:"instance"`
	Policy         govLatency `json:"policy"`
	HeapPerKnown   float64    `json:"heap_per_known_bytes"`
	HeapPerClient  float64    `json:"heap_per_client_bytes"`
	StackPerClient float64    `json:"stack_per_client_bytes"`
	Updates        int64      `json:"updates_applied"`
	CPUPerUpdate   float64    `json:"cpu_per_update_us"`
	ClientCPU      float64    `json:"clients_cpu_cores"`
	EtcdCPU        float64    `json:"etcd_cpu_cores"`
	WriterCPU      float64    `json:"writer_cpu_cores"`
	WritesPerSec   float64    `json:"etcd_writes_per_s"`
	Proposals      float64    `json:"etcd_proposals_per_s"`
	Renewals       float64    `json:"etcd_renewals_per_s"`
	RecordBytes    float64    `json:"record_bytes_per_s"`
	RecvBytes      float64    `json:"etcd_recv_bytes_per_s"`
	SentBytes      float64    `json:"etcd_sent_bytes_per_s"`
	Converged      bool       `json:"converged"`
}

func runGovernance(ctx context.Context, o govOptions) ([]govResult, error) {
	var out []govResult
	for _, s := range o.Sizes {
		r, err := govRun(ctx, o, s)
		if err != nil {
			return out, fmt.Errorf("size %s: %w", s, err)
		}
		out = append(out, r)
		if !r.Converged {
			return out, fmt.Errorf("size %s: not every client converged", s)
		}
	}
	return out, nil
}

func (o govOptions) logf(format string, args ...any) {
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, "governance: "+format+"\n", args...)
	}
}

// govChild is a running child process and its line protocol.
type govChild struct {
	cmd    *exec.Cmd
	enc    *json.Encoder
	stdin  io.Closer
	lines  chan []byte
	stderr *bench.TailBuffer
	waited chan struct{}
}

func startGovChild(name string) (*govChild, error) {
	cmd := govLaunch(name)
	c := &govChild{cmd: cmd, stderr: &bench.TailBuffer{}, lines: make(chan []byte, 4), waited: make(chan struct{})}
	cmd.Stderr = c.stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c.enc, c.stdin = json.NewEncoder(in), in
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<30)
		for sc.Scan() {
			c.lines <- slices.Clone(sc.Bytes())
		}
		close(c.lines)
	}()
	go func() { cmd.Wait(); close(c.waited) }()
	return c, nil
}

// read decodes the child's next line into v within timeout.
func (c *govChild) read(ctx context.Context, v any, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case b, ok := <-c.lines:
		if !ok {
			<-c.waited
			return fmt.Errorf("child %s exited: %s", c.cmd.Args[1], c.stderr)
		}
		return json.Unmarshal(b, v)
	case <-t.C:
		return fmt.Errorf("child %s: no answer within %v: %s", c.cmd.Args[1], timeout, c.stderr)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stop closes the child's stdin, which ends it, and kills it (by PID) if
// it has not exited 10 s later.
func (c *govChild) stop() {
	c.stdin.Close()
	select {
	case <-c.waited:
	case <-time.After(10 * time.Second):
		c.cmd.Process.Kill()
		<-c.waited
	}
}

// govEvent is one write: kind 'a'dd, 'u'pdate, 'r'emove or 'p'olicy.
type govEvent struct {
	kind byte
	svc  int
	id   int64 // instance id, or for 'p' none
	v    int64 // record or policy version
	at   int64 // unix ns just before the write
	done int64 // unix ns when etcd acknowledged it
}

// govWriter does the writes of a run: one Registrar per service (as the
// services' own servers would) sharing one etcd connection.
type govWriter struct {
	names []string
	regs  []*etcd.Registrar
	store *etcd.PolicyStore

	mu     sync.Mutex
	events []govEvent
	bytes  int64 // keys and records put
	err    error
}

func govInstance(svc string, id, v int64) registry.Instance {
	return registry.Instance{
		Service: svc,
		Addr:    fmt.Sprintf("10.%d.%d.%d:8972", id>>16&255, id>>8&255, id&255),
		Weight:  1 + int(v%3),
		Tags:    []string{"v1"},
		Meta:    map[string]string{"id": strconv.FormatInt(id, 10), "v": strconv.FormatInt(v, 10)},
	}
}

func govPolicy(svc string, v int64) []byte {
	doc := fmt.Sprintf(`{"version":%q,"service":%q,"subsets":[{"name":"v1","tags":["v1"]}],`+
		`"routes":[{"name":"all","destinations":[{"subset":"v1","weight":100}],"timeout":"%dms"}]}`,
		strconv.FormatInt(v, 10), svc, 500+v%500)
	return []byte(doc)
}

// do performs one write and records it (unless it is part of the set-up).
func (w *govWriter) do(ctx context.Context, e govEvent, record bool) {
	svc := w.names[e.svc]
	e.at = time.Now().UnixNano()
	var err error
	var n int
	switch e.kind {
	case 'a', 'u':
		in := govInstance(svc, e.id, e.v)
		b, _ := in.Marshal()
		n = len(b) + len("/fleet/services/"+svc+"/"+in.Key())
		if e.kind == 'a' {
			err = w.regs[e.svc].Register(ctx, in)
		} else {
			err = w.regs[e.svc].Update(ctx, in)
		}
	case 'r':
		err = w.regs[e.svc].Deregister(ctx, govInstance(svc, e.id, 0))
	case 'p':
		doc := govPolicy(svc, e.v)
		n = len(doc) + len("/fleet/policies/"+svc)
		err = w.store.Put(ctx, svc, doc)
	}
	e.done = time.Now().UnixNano()
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil && w.err == nil {
		w.err = err
	}
	if record {
		w.events = append(w.events, e)
		w.bytes += int64(n)
	}
}

// govState is the writer's model of the registry: each service's
// instance ids, oldest first, their versions and its policy version.
type govState struct {
	ids    [][]int64
	v      map[int64]int64
	policy []int64
	nextID int64
	seq    int64
}

func (s *govState) expects() *govExpects {
	ex := &govExpects{Policy: slices.Clone(s.policy)}
	for _, ids := range s.ids {
		pairs := make([][2]int64, len(ids))
		for i, id := range ids {
			pairs[i] = [2]int64{id, s.v[id]}
		}
		ex.Instances = append(ex.Instances, pairs)
	}
	return ex
}

// next is the k-th instance change: on service k mod S, in turn an
// update of its newest instance, a removal of its oldest, an addition.
func (s *govState) next(k int) govEvent {
	svc := k % len(s.ids)
	s.seq++
	e := govEvent{svc: svc, v: s.seq}
	ids := s.ids[svc]
	switch (k / len(s.ids)) % 3 {
	case 0:
		e.kind, e.id = 'u', ids[len(ids)-1]
		s.v[e.id] = e.v
	case 1:
		e.kind, e.id = 'r', ids[0]
		s.ids[svc] = ids[1:]
		delete(s.v, e.id)
		e.v = -1
	default:
		e.kind, e.id = 'a', s.nextID
		s.nextID++
		s.ids[svc] = append(ids, e.id)
		s.v[e.id] = e.v
	}
	return e
}

func govRun(ctx context.Context, o govOptions, size govSize) (govResult, error) {
	res := govResult{Size: size.String(), Instances: size.Services * size.PerService, Clients: o.Clients, Procs: o.Procs, Watch: min(o.Watch, size.Services)}
	o.logf("%s: starting etcd", size)
	ec, err := startGovChild(govEtcdCommand)
	if err != nil {
		return res, err
	}
	defer ec.stop()
	var hello struct{ Endpoint string }
	if err := ec.read(ctx, &hello, 60*time.Second); err != nil {
		return res, err
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{hello.Endpoint}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return res, err
	}
	defer cli.Close()
	quiet := slog.New(slog.DiscardHandler)
	ecfg := etcd.Config{Client: cli, TTL: o.TTL, Logger: quiet}
	w := &govWriter{}
	st := &govState{v: map[int64]int64{}, policy: make([]int64, size.Services)}
	for i := range size.Services {
		w.names = append(w.names, fmt.Sprintf("svc%03d", i))
		// Leases granted together renew together (every TTL/3), in a
		// burst of thousands; servers that started at different times
		// spread them. Service i's TTL is TTL*(1+i/S).
		rcfg := ecfg
		rcfg.TTL = o.TTL + o.TTL*time.Duration(i)/time.Duration(size.Services)
		r, _ := etcd.NewRegistrar(rcfg)
		defer r.Close()
		w.regs = append(w.regs, r)
		ids := make([]int64, size.PerService)
		for j := range ids {
			ids[j] = st.nextID
			st.v[st.nextID] = 0
			st.nextID++
		}
		st.ids = append(st.ids, ids)
	}
	w.store, _ = etcd.NewPolicyStore(ecfg)
	defer w.store.Close()

	o.logf("%s: registering %d instances", size, res.Instances)
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for svc, ids := range st.ids {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			w.do(sctx, govEvent{kind: 'p', svc: svc, v: 0}, false)
			for _, id := range ids {
				w.do(sctx, govEvent{kind: 'a', svc: svc, id: id, v: 0}, false)
			}
		})
	}
	wg.Wait()
	if w.err != nil {
		return res, fmt.Errorf("set-up: %w", w.err)
	}

	// The clients: client c watches services c*W .. c*W+W-1 (mod S).
	W := res.Watch
	watchers := make([][]int, size.Services) // per service: its clients
	assign := make([][]int, o.Clients)
	for c := range assign {
		for j := range W {
			s := (c*W + j) % size.Services
			assign[c] = append(assign[c], s)
			watchers[s] = append(watchers[s], c)
		}
	}
	o.logf("%s: starting %d clients in %d processes", size, o.Clients, o.Procs)
	initial := st.expects()
	var kids []*govChild
	defer func() {
		for _, k := range kids {
			k.stop()
		}
	}()
	for p := range o.Procs {
		lo, hi := p*o.Clients/o.Procs, (p+1)*o.Clients/o.Procs
		profile := ""
		if o.Profile != "" {
			profile = fmt.Sprintf("%s-%s-%d.pprof", o.Profile, size, p)
		}
		k, err := startGovChild(govClientsCommand)
		if err != nil {
			return res, err
		}
		kids = append(kids, k)
		if err := k.enc.Encode(govClientsConfig{Endpoint: hello.Endpoint, Services: w.names, Clients: assign[lo:hi], First: lo, Expect: *initial, Profile: profile}); err != nil {
			return res, err
		}
	}
	var heap, stack float64
	var known int64
	for _, k := range kids {
		var r govReady
		if err := k.read(ctx, &r, 3*time.Minute); err != nil {
			return res, err
		}
		if r.Err != "" {
			return res, errors.New(r.Err)
		}
		heap += float64(r.HeapReady) - float64(r.HeapBase)
		stack += float64(r.Stack)
		known += r.Known
	}
	res.HeapPerKnown = heap / float64(known)
	res.HeapPerClient = heap / float64(o.Clients)
	res.StackPerClient = stack / float64(o.Clients)
	res.KnownPerClient = float64(known) / float64(o.Clients)

	o.logf("%s: every client has the state; churn at %g/s for %v", size, o.Churn, o.Duration)
	var e0, e1 govStats
	ec.enc.Encode("stats")
	if err := ec.read(ctx, &e0, 10*time.Second); err != nil {
		return res, err
	}
	for _, k := range kids {
		k.enc.Encode(govMsg{Op: "go"})
	}
	for _, k := range kids { // every child records before the first write
		var ack struct{}
		if err := k.read(ctx, &ack, 30*time.Second); err != nil {
			return res, err
		}
	}
	cpu0, t0 := selfCPU(), time.Now()
	queues := make([]chan govEvent, size.Services)
	var wwg sync.WaitGroup
	for i := range queues {
		queues[i] = make(chan govEvent, 1024)
		wwg.Go(func() {
			for e := range queues[i] {
				w.do(ctx, e, true)
			}
		})
	}
	policyQ := make(chan govEvent, 1024)
	wwg.Go(func() {
		for e := range policyQ {
			w.do(ctx, e, true)
		}
	})
	total := int(o.Churn * o.Duration.Seconds())
	every := 0
	if o.Policies > 0 {
		every = max(1, total/o.Policies)
	}
	policies := 0
	var renewals []string
	lastRenewals := e0.Renewals
	// Change k is due at t0 + k/churn; a late writer catches up at once
	// rather than stretching the run.
	for k := 0; k < total && ctx.Err() == nil; k++ {
		if d := time.Until(t0.Add(time.Duration(float64(k) * float64(time.Second) / o.Churn))); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
			}
		}
		if k > 0 && k%max(1, int(o.Churn)) == 0 { // each second: etcd's lease renewals
			var es govStats
			ec.enc.Encode("stats")
			if err := ec.read(ctx, &es, 10*time.Second); err == nil {
				renewals = append(renewals, fmt.Sprintf("%.0f", es.Renewals-lastRenewals))
				lastRenewals = es.Renewals
			}
		}
		e := st.next(k)
		queues[e.svc] <- e
		if every > 0 && k%every == every/2 && policies < o.Policies {
			svc := (policies * 7) % size.Services
			st.seq++
			st.policy[svc] = st.seq
			policyQ <- govEvent{kind: 'p', svc: svc, v: st.seq}
			policies++
		}
	}
	o.logf("%s: etcd lease renewals in each second of the churn: %s", size, strings.Join(renewals, " "))
	for _, q := range queues {
		close(q)
	}
	close(policyQ)
	wwg.Wait()
	window := time.Since(t0).Seconds()
	res.WriterCPU = float64(selfCPU()-cpu0) / 1e9 / window
	ec.enc.Encode("stats")
	if err := ec.read(ctx, &e1, 10*time.Second); err != nil {
		return res, err
	}
	if w.err != nil {
		return res, fmt.Errorf("churn: %w", w.err)
	}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	res.Seconds = window
	res.ChurnRate = float64(total) / window
	res.EtcdCPU = float64(e1.CPU-e0.CPU) / 1e9 / window
	res.WritesPerSec = (e1.Puts + e1.Deletes - e0.Puts - e0.Deletes) / window
	res.Proposals = (e1.Proposals - e0.Proposals) / window
	res.Renewals = (e1.Renewals - e0.Renewals) / window
	res.RecvBytes = (e1.RecvBytes - e0.RecvBytes) / window
	res.SentBytes = (e1.SentBytes - e0.SentBytes) / window
	res.RecordBytes = float64(w.bytes) / window

	o.logf("%s: waiting for every client to converge", size)
	final := st.expects()
	res.Converged = true
	var inst, pol [][4]int64
	var cpu float64
	for _, k := range kids {
		k.enc.Encode(govMsg{Op: "end", Expect: final})
	}
	for _, k := range kids {
		var r govReport
		if err := k.read(ctx, &r, time.Minute); err != nil {
			return res, err
		}
		if !r.Converged {
			res.Converged = false
			o.logf("%s: not converged: %s", size, r.Pending)
		}
		cpu += float64(r.CPUEnd - r.CPUGo)
		inst = append(inst, r.Inst...)
		pol = append(pol, r.Pol...)
	}
	res.Updates = int64(len(inst) + len(pol))
	if res.Updates > 0 {
		res.CPUPerUpdate = cpu / 1e3 / float64(res.Updates)
	}
	res.ClientCPU = cpu / 1e9 / window
	var lasts []float64
	res.Instance, res.Policy, lasts = govLatenciesEach(w.events, watchers, inst, pol)
	slow, first, end := 0, math.Inf(1), math.Inf(-1)
	for i, l := range lasts {
		if l > 500 {
			at := float64(w.events[i].at-t0.UnixNano()) / 1e9
			slow, first, end = slow+1, min(first, at), max(end, at)
		}
	}
	if slow > 0 {
		o.logf("%s: %d writes took over 500 ms to reach every client, written %.1f to %.1f s into the churn", size, slow, first, end)
	}
	var commits []float64
	for _, e := range w.events {
		commits = append(commits, float64(e.done-e.at)/1e6)
	}
	slices.Sort(commits)
	res.Commit = govLatency{Writes: len(commits), AllP50: quantile(commits, 0.5), AllP99: quantile(commits, 0.99), AllMax: quantile(commits, 1)}
	return res, nil
}

// govLatencies matches each write with its application by every client
// watching its service: an addition or update of record version v is
// applied when the client first holds the instance at version v or later,
// a removal when it no longer holds the instance, a policy of version v
// when the client first runs version v or later.
func govLatencies(events []govEvent, watchers [][]int, inst, pol [][4]int64) (instance, policy govLatency) {
	instance, policy, _ = govLatenciesEach(events, watchers, inst, pol)
	return instance, policy
}

// govLatenciesEach is govLatencies that also returns each write's time to
// its last client, in ms (-1 when no client applied it).
func govLatenciesEach(events []govEvent, watchers [][]int, inst, pol [][4]int64) (instance, policy govLatency, last []float64) {
	type key struct{ c, x int64 }
	seen := map[key][][2]int64{} // (client, instance id or service) -> [v, at]...
	for _, o := range inst {
		k := key{o[0], o[1]}
		seen[k] = append(seen[k], [2]int64{o[2], o[3]})
	}
	pseen := map[key][][2]int64{}
	for _, o := range pol {
		k := key{o[0], o[1]}
		pseen[k] = append(pseen[k], [2]int64{o[2], o[3]})
	}
	var iAll, iEach, pAll, pEach, lasts []float64
	for _, e := range events {
		all, each, l, obs := &iAll, &iEach, &instance, seen
		x := e.id
		if e.kind == 'p' {
			all, each, l, obs, x = &pAll, &pEach, &policy, pseen, int64(e.svc)
		}
		l.Writes++
		last := -1.0
		for _, c := range watchers[e.svc] {
			at := int64(-1)
			for _, s := range obs[key{int64(c), x}] {
				if (e.kind == 'r' && s[0] == -1) || (e.kind != 'r' && s[0] >= e.v) {
					at = s[1]
					break
				}
			}
			if at < 0 {
				l.Missing++
				continue
			}
			ms := float64(at-e.at) / 1e6
			*each = append(*each, ms)
			last = max(last, ms)
		}
		if last >= 0 {
			*all = append(*all, last)
		}
		lasts = append(lasts, last)
	}
	fill := func(l *govLatency, all, each []float64) {
		slices.Sort(all)
		slices.Sort(each)
		l.AllP50, l.AllP99, l.AllMax = quantile(all, 0.5), quantile(all, 0.99), quantile(all, 1)
		l.P50, l.P99 = quantile(each, 0.5), quantile(each, 0.99)
	}
	fill(&instance, iAll, iEach)
	fill(&policy, pAll, pEach)
	return instance, policy, lasts
}

// quantile returns the q-quantile of sorted xs (nearest rank), 0 when
// empty.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[max(0, min(i, len(xs)-1))]
}

// writeGovernance prints the results as a markdown table, one column per
// size.
func writeGovernance(w io.Writer, res []govResult) {
	row := func(name string, f func(r govResult) string) {
		fmt.Fprintf(w, "| %s |", name)
		for _, r := range res {
			fmt.Fprintf(w, " %s |", f(r))
		}
		fmt.Fprintln(w)
	}
	ms := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
	row("services x instances", func(r govResult) string { return fmt.Sprintf("%s = %d", r.Size, r.Instances) })
	fmt.Fprint(w, "|---|")
	for range res {
		fmt.Fprint(w, "---:|")
	}
	fmt.Fprintln(w)
	row("clients (processes) x services watched", func(r govResult) string { return fmt.Sprintf("%d (%d) x %d", r.Clients, r.Procs, r.Watch) })
	row("instances known per client", func(r govResult) string { return fmt.Sprintf("%.0f", r.KnownPerClient) })
	row("instance changes/s (s)", func(r govResult) string { return fmt.Sprintf("%.1f (%.1f s)", r.ChurnRate, r.Seconds) })
	row("write acknowledged by etcd p50 / p99 / max, ms", func(r govResult) string {
		return ms(r.Commit.AllP50) + " / " + ms(r.Commit.AllP99) + " / " + ms(r.Commit.AllMax)
	})
	row("instance change to all clients p50 / p99 / max, ms", func(r govResult) string {
		return ms(r.Instance.AllP50) + " / " + ms(r.Instance.AllP99) + " / " + ms(r.Instance.AllMax)
	})
	row("instance change per client p50 / p99, ms", func(r govResult) string { return ms(r.Instance.P50) + " / " + ms(r.Instance.P99) })
	row("policy changes", func(r govResult) string { return strconv.Itoa(r.Policy.Writes) })
	row("policy change to all clients p50 / p99 / max, ms", func(r govResult) string {
		return ms(r.Policy.AllP50) + " / " + ms(r.Policy.AllP99) + " / " + ms(r.Policy.AllMax)
	})
	row("policy change per client p50 / p99, ms", func(r govResult) string { return ms(r.Policy.P50) + " / " + ms(r.Policy.P99) })
	row("superseded before seen (write, client) pairs", func(r govResult) string { return strconv.Itoa(r.Instance.Missing + r.Policy.Missing) })
	row("client heap per known instance, bytes", func(r govResult) string { return fmt.Sprintf("%.0f", r.HeapPerKnown) })
	row("client heap / goroutine stacks per client, KiB", func(r govResult) string {
		return fmt.Sprintf("%.0f / %.0f", r.HeapPerClient/1024, r.StackPerClient/1024)
	})
	row("updates applied (client x change)", func(r govResult) string { return strconv.FormatInt(r.Updates, 10) })
	row("client CPU per update applied, µs", func(r govResult) string { return fmt.Sprintf("%.1f", r.CPUPerUpdate) })
	row("CPU, cores: clients / etcd / writer", func(r govResult) string {
		return fmt.Sprintf("%.2f / %.2f / %.2f", r.ClientCPU, r.EtcdCPU, r.WriterCPU)
	})
	row("etcd puts+deletes/s / proposals/s / lease renewals/s", func(r govResult) string {
		return fmt.Sprintf("%.0f / %.0f / %.0f", r.WritesPerSec, r.Proposals, r.Renewals)
	})
	row("records written, KB/s", func(r govResult) string { return fmt.Sprintf("%.1f", r.RecordBytes/1e3) })
	row("etcd gRPC received / sent, KB/s", func(r govResult) string {
		return fmt.Sprintf("%.0f / %.0f", r.RecvBytes/1e3, r.SentBytes/1e3)
	})
	row("every client converged", func(r govResult) string { return strconv.FormatBool(r.Converged) })
}
