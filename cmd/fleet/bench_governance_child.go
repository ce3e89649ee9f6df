package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"reflect"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fleetrpc/fleet/policy"
	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/registry/etcd"
	"github.com/fleetrpc/fleet/registry/etcd/embedded"
)

// The hidden subcommands that fleet bench governance runs as its child
// processes: an in-process etcd, and a process of watching clients.
const (
	govEtcdCommand    = "bench-governance-etcd"
	govClientsCommand = "bench-governance-clients"
)

// govLaunch starts a child process of fleet bench governance: this binary
// with args. Tests replace it to run their own binary as the fleet CLI.
var govLaunch = func(args ...string) *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	return exec.Command(exe, args...)
}

func init() {
	rootCmd.AddCommand(hiddenChild(govEtcdCommand, govEtcdMain), hiddenChild(govClientsCommand, govClientsMain))
}

func hiddenChild(name string, run func(in io.Reader, out io.Writer) error) *cobra.Command {
	return &cobra.Command{
		Use:                name,
		Short:              "internal: a child process of fleet bench governance",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(*cobra.Command, []string) error {
			return run(os.Stdin, os.Stdout)
		},
	}
}

// govStats is what a child reports when asked: its CPU time and, for the
// etcd child, etcd's own counters.
type govStats struct {
	CPU int64 `json:"cpu_ns"`
	// etcd child only: puts and deletes applied, consensus proposals
	// committed, lease renewals, bytes received from and sent to its
	// gRPC clients.
	Puts      float64 `json:"puts,omitempty"`
	Deletes   float64 `json:"deletes,omitempty"`
	Proposals float64 `json:"proposals,omitempty"`
	Renewals  float64 `json:"renewals,omitempty"`
	RecvBytes float64 `json:"recv_bytes,omitempty"`
	SentBytes float64 `json:"sent_bytes,omitempty"`
}

func selfCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// govEtcdMain runs etcd in this process: it prints {"endpoint": ...},
// then answers each line on in with its govStats, and stops etcd (removing
// its data) when in ends or on SIGINT/SIGTERM.
func govEtcdMain(in io.Reader, out io.Writer) error {
	srv, err := embedded.New("")
	if err != nil {
		return err
	}
	defer srv.Close()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	enc := json.NewEncoder(out)
	if err := enc.Encode(map[string]string{"endpoint": srv.Endpoint()}); err != nil {
		return err
	}
	lines := make(chan struct{})
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			lines <- struct{}{}
		}
	}()
	for {
		select {
		case <-sig:
			return nil
		case _, ok := <-lines:
			if !ok {
				return nil
			}
			st := govStats{CPU: selfCPU()}
			mfs, _ := prometheus.DefaultGatherer.Gather()
			for _, mf := range mfs {
				var sum float64
				for _, m := range mf.GetMetric() {
					switch {
					case m.GetCounter() != nil:
						sum += m.GetCounter().GetValue()
					case m.GetGauge() != nil:
						sum += m.GetGauge().GetValue()
					}
				}
				switch mf.GetName() {
				case "etcd_mvcc_put_total":
					st.Puts = sum
				case "etcd_mvcc_delete_total":
					st.Deletes = sum
				case "etcd_server_proposals_committed_total":
					st.Proposals = sum
				case "etcd_debugging_lease_renewed_total":
					st.Renewals = sum
				case "etcd_network_client_grpc_received_bytes_total":
					st.RecvBytes = sum
				case "etcd_network_client_grpc_sent_bytes_total":
					st.SentBytes = sum
				}
			}
			if err := enc.Encode(st); err != nil {
				return err
			}
		}
	}
}

// govClientsConfig is the first line a clients child reads.
type govClientsConfig struct {
	Endpoint string     `json:"endpoint"`
	Services []string   `json:"services"`
	Clients  [][]int    `json:"clients"` // per client: the indexes of the services it watches
	First    int        `json:"first"`   // the global index of this child's first client
	Expect   govExpects `json:"expect"`  // the state every client must reach before it is ready
	// Profile, when set, is where to write a CPU profile of the churn
	// (from "go" to "end").
	Profile string `json:"profile,omitempty"`
}

// govExpects is the state of every service: its instances' ids and
// record versions, and its policy version.
type govExpects struct {
	Instances [][][2]int64 `json:"instances"` // per service: [id, v] pairs
	Policy    []int64      `json:"policy"`    // per service
}

// govMsg is a line from the parent to a clients child after the config:
// "go" starts recording (the child answers {"cpu_go": ns}), "end" (with
// the final state) waits for every client to reach it and reports.
type govMsg struct {
	Op     string      `json:"op"`
	Expect *govExpects `json:"expect,omitempty"`
}

// govReady is a clients child's answer to its config, once every client
// has reached the expected state.
type govReady struct {
	HeapBase  uint64 `json:"heap_base"`  // live heap with the clients connected, before watching
	HeapReady uint64 `json:"heap_ready"` // live heap once every watch has its state
	Stack     uint64 `json:"stack_delta"`
	Known     int64  `json:"known"` // instances known, summed over the clients
	Watches   int    `json:"watches"`
	Err       string `json:"err,omitempty"`
}

// govReport is a clients child's answer to "end".
type govReport struct {
	CPUGo     int64      `json:"cpu_go"`
	CPUEnd    int64      `json:"cpu_end"`
	Converged bool       `json:"converged"`
	Pending   string     `json:"pending,omitempty"` // a client and service that did not converge
	Inst      [][4]int64 `json:"inst"`              // [client, id, v or -1 when removed, unix ns]
	Pol       [][4]int64 `json:"pol"`               // [client, service, policy version, unix ns]
}

// govWatch is one client's view of one service.
type govWatch struct {
	client, svc int
	mu          sync.Mutex
	list        []registry.Instance // the last list delivered, sorted by Key
	policy      int64               // -1 before the first policy
}

type govRecorder struct {
	on   atomic.Bool
	mu   sync.Mutex
	inst [][4]int64
	pol  [][4]int64
}

func metaInt(in registry.Instance, k string) int64 {
	n, _ := strconv.ParseInt(in.Meta[k], 10, 64)
	return n
}

func sameMap(a, b map[string]string) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// apply takes list as w's state, recording what changed since the last
// one: both are sorted by Key, so one merge walk finds the additions,
// removals and new record versions without allocating.
func (w *govWatch) apply(list []registry.Instance, rec *govRecorder) {
	now := time.Now().UnixNano()
	var changed [][4]int64
	c := int64(w.client)
	w.mu.Lock()
	old := w.list
	i, j := 0, 0
	for i < len(old) || j < len(list) {
		switch {
		case j == len(list) || (i < len(old) && old[i].Key() < list[j].Key()):
			changed = append(changed, [4]int64{c, metaInt(old[i], "id"), -1, now})
			i++
		case i == len(old) || list[j].Key() < old[i].Key():
			changed = append(changed, [4]int64{c, metaInt(list[j], "id"), metaInt(list[j], "v"), now})
			j++
		default:
			// The etcd Discovery shares an unchanged instance's Meta
			// between lists: the same map is the same version.
			if !sameMap(old[i].Meta, list[j].Meta) && old[i].Meta["v"] != list[j].Meta["v"] {
				changed = append(changed, [4]int64{c, metaInt(list[j], "id"), metaInt(list[j], "v"), now})
			}
			i++
			j++
		}
	}
	w.list = list
	w.mu.Unlock()
	if rec.on.Load() && len(changed) > 0 {
		rec.mu.Lock()
		rec.inst = append(rec.inst, changed...)
		rec.mu.Unlock()
	}
}

func (w *govWatch) applyPolicy(p *policy.Policy, rec *govRecorder) {
	now := time.Now().UnixNano()
	v := int64(-1)
	if p != nil {
		v, _ = strconv.ParseInt(p.Version(), 10, 64)
	}
	w.mu.Lock()
	w.policy = v
	w.mu.Unlock()
	if rec.on.Load() {
		rec.mu.Lock()
		rec.pol = append(rec.pol, [4]int64{int64(w.client), int64(w.svc), v, now})
		rec.mu.Unlock()
	}
}

// reached reports whether w holds exactly the expected state.
func (w *govWatch) reached(ex *govExpects) bool {
	want := ex.Instances[w.svc]
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.policy != ex.Policy[w.svc] || len(w.list) != len(want) {
		return false
	}
	ids := make(map[int64]int64, len(want))
	for _, p := range want {
		ids[p[0]] = p[1]
	}
	for _, in := range w.list {
		if v, ok := ids[metaInt(in, "id")]; !ok || v != metaInt(in, "v") {
			return false
		}
	}
	return true
}

// waitReached polls until every watch reached ex or timeout passes; it
// returns a watch that did not, or nil.
func waitReached(watches []*govWatch, ex *govExpects, timeout time.Duration) *govWatch {
	deadline := time.Now().Add(timeout)
	i := 0
	for {
		for i < len(watches) && watches[i].reached(ex) {
			i++
		}
		if i == len(watches) {
			return nil
		}
		if time.Now().After(deadline) {
			return watches[i]
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func heapNow() (heap, stack uint64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc, ms.StackInuse
}

// govClientsMain runs a child process of clients: each has its own etcd
// connection, a Discovery watch and a policy.Watcher per service it
// watches. See govClientsConfig, govMsg, govReady and govReport for the
// line protocol on in and out. It ends when in ends.
func govClientsMain(in io.Reader, out io.Writer) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<30)
	enc := json.NewEncoder(out)
	if !sc.Scan() {
		return errors.New("no configuration")
	}
	var cfg govClientsConfig
	if err := json.Unmarshal(sc.Bytes(), &cfg); err != nil {
		return err
	}
	quiet := slog.New(slog.DiscardHandler)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := &govRecorder{}
	type client struct {
		cli   *clientv3.Client
		disc  *etcd.Discovery
		store *etcd.PolicyStore
		ws    []*policy.Watcher
	}
	clients := make([]*client, len(cfg.Clients))
	defer func() {
		for _, c := range clients {
			if c == nil {
				continue
			}
			for _, w := range c.ws {
				w.Close()
			}
			c.store.Close()
			c.disc.Close()
			c.cli.Close()
		}
	}()
	for i := range cfg.Clients {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{cfg.Endpoint}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			return err
		}
		ecfg := etcd.Config{Client: cli, Logger: quiet}
		disc, _ := etcd.NewDiscovery(ecfg)
		store, _ := etcd.NewPolicyStore(ecfg)
		clients[i] = &client{cli: cli, disc: disc, store: store}
		rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
		_, err = cli.Get(rctx, "/fleet/bench-connect") // connect before the baseline
		rcancel()
		if err != nil {
			return fmt.Errorf("client %d: connect: %w", i, err)
		}
	}
	heapBase, stackBase := heapNow()
	var watches []*govWatch
	var known int64
	for i, svcs := range cfg.Clients {
		c := clients[i]
		for _, s := range svcs {
			w := &govWatch{client: cfg.First + i, svc: s, policy: -1}
			watches = append(watches, w)
			known += int64(len(cfg.Expect.Instances[s]))
			ch, err := c.disc.Watch(ctx, cfg.Services[s])
			if err != nil {
				return err
			}
			go func() {
				for list := range ch {
					w.apply(list, rec)
				}
			}()
			pw, err := policy.NewWatcher(c.store, cfg.Services[s], policy.WatcherConfig{Logger: quiet})
			if err != nil {
				return err
			}
			c.ws = append(c.ws, pw)
			pw.OnChange(func(p *policy.Policy) { w.applyPolicy(p, rec) })
		}
	}
	ready := govReady{Known: known, Watches: len(watches), HeapBase: heapBase}
	if w := waitReached(watches, &cfg.Expect, 60*time.Second); w != nil {
		ready.Err = fmt.Sprintf("client %d did not get service %s's state within 60s", w.client, cfg.Services[w.svc])
	}
	var stack uint64
	ready.HeapReady, stack = heapNow()
	ready.Stack = stack - min(stack, stackBase)
	if err := enc.Encode(ready); err != nil {
		return err
	}
	var rep govReport
	for sc.Scan() {
		var m govMsg
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			return err
		}
		switch m.Op {
		case "go":
			if cfg.Profile != "" {
				f, err := os.Create(cfg.Profile)
				if err != nil {
					return err
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
			}
			rec.on.Store(true)
			rep.CPUGo = selfCPU()
			// The parent starts writing once every child records.
			if err := enc.Encode(map[string]int64{"cpu_go": rep.CPUGo}); err != nil {
				return err
			}
		case "end":
			w := waitReached(watches, m.Expect, 30*time.Second)
			rep.CPUEnd = selfCPU()
			rec.on.Store(false)
			if cfg.Profile != "" {
				pprof.StopCPUProfile()
			}
			rep.Converged = w == nil
			if w != nil {
				rep.Pending = fmt.Sprintf("client %d, service %s", w.client, cfg.Services[w.svc])
			}
			rec.mu.Lock()
			rep.Inst, rep.Pol = rec.inst, rec.pol
			rec.mu.Unlock()
			if err := enc.Encode(rep); err != nil {
				return err
			}
		default:
			return fmt.Errorf("unknown op %q", strings.TrimSpace(m.Op))
		}
	}
	return nil
}
