package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/registry/static"
	"github.com/fleetrpc/fleet/server"
)

// SoakOptions configures Soak.
type SoakOptions struct {
	// Duration is how long the load runs. Default 1 minute.
	Duration time.Duration
	// Interval is the sampling period. Default 1 s.
	Interval time.Duration
	// Callers is the number of goroutines making successful calls through
	// the XClient. Default 8. Two more goroutines make failing calls, two
	// send oneway requests, one reconnects for every call, and one churns
	// the registry.
	Callers int
	// Pause is each load goroutine's pause between calls. Default 1 ms, so
	// the soak measures growth, not the machine's peak throughput.
	Pause time.Duration
	// Progress, when not nil, receives one line per sample.
	Progress io.Writer
}

// SoakSample is one sample of the process's resources.
type SoakSample struct {
	Seconds    float64 `json:"seconds"`     // since the load started
	RSS        int64   `json:"rss_bytes"`   // VmRSS of /proc/self/status; 0 where unavailable
	Heap       int64   `json:"heap_bytes"`  // runtime HeapAlloc right after a GC: the live heap
	Goroutines int     `json:"goroutines"`  // runtime.NumGoroutine
	FDs        int     `json:"open_fds"`    // entries of /proc/self/fd; 0 where unavailable
	Calls      int64   `json:"calls_total"` // successful calls and oneway sends so far
}

// SoakResult is the outcome of Soak. Slopes are least-squares fits over
// the second half of the samples, in units per minute.
type SoakResult struct {
	Seconds        float64      `json:"seconds"`
	Calls          int64        `json:"calls"`           // successful calls
	Oneway         int64        `json:"oneway"`          // oneway sends accepted
	Failed         int64        `json:"failed_expected"` // calls to the failing method that failed as expected
	Reconnects     int64        `json:"reconnects"`      // connections opened and closed for one call
	Churns         int64        `json:"registry_churns"` // deregister/register cycles
	Errors         int64        `json:"errors"`          // unexpected call errors
	FirstError     string       `json:"first_error,omitempty"`
	Samples        []SoakSample `json:"samples"`
	RSSSlope       float64      `json:"rss_bytes_per_min"`
	HeapSlope      float64      `json:"heap_bytes_per_min"`
	GoroutineSlope float64      `json:"goroutines_per_min"`
	FDSlope        float64      `json:"fds_per_min"`
	// Before and After are taken after a GC, before the servers start
	// and once the load has stopped and every client and server closed.
	Before, After SoakSample `json:"-"`
}

// SoakRequest is the request of the soak's service "Soak".
type SoakRequest struct {
	N    int
	Data []byte
}

// SoakReply is the reply of the soak's service: N plus the request's
// data length.
type SoakReply struct{ N int }

// errSoakFail is what the soak's failing method returns.
var errSoakFail = fleet.NewError(fleet.InvalidArgument, "soak: this method always fails")

// Soak runs mixed load against two in-process servers of one service for
// opts.Duration: successful calls through an XClient (failover, P2C
// selector), calls that fail with InvalidArgument, oneway sends, one call
// per fresh connection (reconnects), and registry churn (one server
// deregistered and registered again every 2 s in a registry/static
// table). It samples RSS, heap, goroutines and open fds every interval
// and fits each one's slope over the second half. Each sample follows a
// runtime.GC, so the heap figure is the live heap, not the collector's
// sawtooth. Unexpected call errors
// are counted, not fatal. It stops early, with the samples so far, when
// ctx ends.
func Soak(ctx context.Context, opts SoakOptions) (SoakResult, error) {
	if opts.Duration <= 0 {
		opts.Duration = time.Minute
	}
	if opts.Interval <= 0 {
		opts.Interval = time.Second
	}
	if opts.Callers <= 0 {
		opts.Callers = 8
	}
	if opts.Pause <= 0 {
		opts.Pause = time.Millisecond
	}
	var res SoakResult
	res.Before = sampleAfterGC()

	// Servers.
	var onewayRun atomic.Int64
	type srvProc struct {
		srv  *server.Server
		addr string
		done chan struct{}
	}
	var srvs []srvProc
	defer func() {
		for _, s := range srvs {
			s.srv.Close()
			<-s.done
		}
	}()
	for i := 0; i < 2; i++ {
		srv := server.New()
		if err := srv.RegisterFunction("Soak", "Do", func(ctx context.Context, in *SoakRequest, out *SoakReply) error {
			out.N = in.N + len(in.Data)
			return nil
		}); err != nil {
			return res, err
		}
		if err := srv.RegisterFunction("Soak", "Fail", func(ctx context.Context, in *SoakRequest, out *SoakReply) error {
			return errSoakFail
		}); err != nil {
			return res, err
		}
		if err := srv.RegisterFunction("Soak", "Log", func(ctx context.Context, in *SoakRequest, out *SoakReply) error {
			onewayRun.Add(1)
			return nil
		}); err != nil {
			return res, err
		}
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return res, err
		}
		p := srvProc{srv: srv, addr: lis.Addr().String(), done: make(chan struct{})}
		go func() { defer close(p.done); _ = srv.Serve(lis) }()
		srvs = append(srvs, p)
	}

	tab, err := static.NewTable(static.Config{})
	if err != nil {
		return res, err
	}
	reg := tab.Registrar()
	defer reg.Close()
	inst := func(i int) registry.Instance {
		return registry.Instance{Service: "Soak", Addr: srvs[i].addr, Weight: 1}
	}
	for i := range srvs {
		if err := reg.Register(ctx, inst(i)); err != nil {
			return res, err
		}
	}
	x, err := client.NewXClient("Soak", tab.Discovery(), client.WithIdempotent("Do"))
	if err != nil {
		return res, err
	}
	xClosed := false
	defer func() {
		if !xClosed {
			x.Close()
		}
	}()
	one, err := client.Dial(ctx, "tcp", srvs[0].addr)
	if err != nil {
		return res, err
	}
	defer one.Close()

	// Load.
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	var (
		wg       sync.WaitGroup
		errMu    sync.Mutex
		total    atomic.Int64
		calls    atomic.Int64
		oneway   atomic.Int64
		failed   atomic.Int64
		reconn   atomic.Int64
		churns   atomic.Int64
		unexpErr atomic.Int64
	)
	bad := func(err error) {
		if loadCtx.Err() != nil {
			return // the load is stopping: calls end with Canceled
		}
		unexpErr.Add(1)
		errMu.Lock()
		if res.FirstError == "" {
			res.FirstError = err.Error()
		}
		errMu.Unlock()
	}
	loop := func(n int, body func(i int, ctx context.Context)) {
		for w := 0; w < n; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				t := time.NewTimer(opts.Pause)
				defer t.Stop()
				for i := 0; loadCtx.Err() == nil; i++ {
					cctx, cancel := context.WithTimeout(loadCtx, 10*time.Second)
					body(i, cctx)
					cancel()
					t.Reset(opts.Pause)
					select {
					case <-loadCtx.Done():
					case <-t.C:
					}
				}
			}()
		}
	}
	payload := bytes.Repeat([]byte("soak"), 64)
	loop(opts.Callers, func(i int, ctx context.Context) {
		var rep SoakReply
		if err := x.Call(ctx, "Do", &SoakRequest{N: i, Data: payload}, &rep); err != nil {
			bad(err)
			return
		}
		calls.Add(1)
		total.Add(1)
	})
	loop(2, func(i int, ctx context.Context) {
		var rep SoakReply
		err := x.Call(ctx, "Fail", &SoakRequest{N: i}, &rep)
		switch {
		case fleet.CodeOf(err) == fleet.InvalidArgument:
			failed.Add(1)
		case err == nil:
			bad(errors.New("soak: the failing method succeeded"))
		default:
			bad(err)
		}
	})
	loop(2, func(i int, ctx context.Context) {
		if err := one.Send(ctx, "Soak", "Log", &SoakRequest{N: i, Data: payload}); err != nil {
			bad(err)
			return
		}
		oneway.Add(1)
		total.Add(1)
	})
	loop(1, func(i int, ctx context.Context) {
		c, err := client.Dial(ctx, "tcp", srvs[i%2].addr)
		if err != nil {
			bad(err)
			return
		}
		var rep SoakReply
		err = c.Call(ctx, "Soak", "Do", &SoakRequest{N: i}, &rep)
		c.Close()
		if err != nil {
			bad(err)
			return
		}
		reconn.Add(1)
		total.Add(1)
	})
	wg.Add(1)
	go func() { // registry churn: server i%2 leaves and comes back
		defer wg.Done()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-loadCtx.Done():
				return
			case <-tick.C:
			}
			in := inst(i % 2)
			if err := reg.Deregister(loadCtx, in); err != nil {
				bad(err)
				continue
			}
			select {
			case <-loadCtx.Done():
			case <-tick.C:
			}
			if err := reg.Register(context.Background(), in); err != nil {
				bad(err)
				continue
			}
			churns.Add(1)
		}
	}()

	// Sampling.
	start := time.Now()
	tick := time.NewTicker(opts.Interval)
	end := time.NewTimer(opts.Duration)
	defer end.Stop()
sampling:
	for {
		select {
		case <-ctx.Done():
			break sampling
		case <-end.C:
			break sampling
		case now := <-tick.C:
			s := sampleAfterGC() // a full GC a second: small next to the load
			s.Seconds = now.Sub(start).Seconds()
			s.Calls = total.Load()
			res.Samples = append(res.Samples, s)
			if opts.Progress != nil {
				fmt.Fprintf(opts.Progress, "%6.0fs  rss %7.1f MiB  heap %7.1f MiB  goroutines %5d  fds %4d  calls %d\n",
					s.Seconds, mib(s.RSS), mib(s.Heap), s.Goroutines, s.FDs, s.Calls)
			}
		}
	}
	tick.Stop()
	res.Seconds = time.Since(start).Seconds()
	stopLoad()
	wg.Wait()

	res.Calls, res.Oneway, res.Failed = calls.Load(), oneway.Load(), failed.Load()
	res.Reconnects, res.Churns, res.Errors = reconn.Load(), churns.Load(), unexpErr.Load()
	half := res.Samples[len(res.Samples)/2:]
	res.RSSSlope = slope(half, func(s SoakSample) float64 { return float64(s.RSS) })
	res.HeapSlope = slope(half, func(s SoakSample) float64 { return float64(s.Heap) })
	res.GoroutineSlope = slope(half, func(s SoakSample) float64 { return float64(s.Goroutines) })
	res.FDSlope = slope(half, func(s SoakSample) float64 { return float64(s.FDs) })

	x.Close()
	xClosed = true
	one.Close()
	for _, s := range srvs {
		s.srv.Close()
		<-s.done
	}
	srvs = nil
	res.After = sampleAfterGC()
	return res, ctx.Err()
}

// slope is the least-squares slope of v(s) against s.Seconds, per minute;
// 0 with fewer than two samples.
func slope(ss []SoakSample, v func(SoakSample) float64) float64 {
	n := float64(len(ss))
	if n < 2 {
		return 0
	}
	var sx, sy, sxx, sxy float64
	for _, s := range ss {
		x, y := s.Seconds, v(s)
		sx += x
		sy += y
		sxx += x * x
		sxy += x * y
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d * 60
}

// sample reads the process's resources now.
func sample() SoakSample {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return SoakSample{
		RSS:        procRSS(),
		Heap:       int64(ms.HeapAlloc),
		Goroutines: runtime.NumGoroutine(),
		FDs:        openFDs(),
	}
}

// sampleAfterGC samples after a garbage collection, so that Heap is the
// live heap.
func sampleAfterGC() SoakSample {
	runtime.GC()
	return sample()
}

// procRSS is VmRSS of /proc/self/status in bytes; 0 where unavailable.
func procRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte("VmRSS:")) {
			continue
		}
		fields := bytes.Fields(line[len("VmRSS:"):])
		if len(fields) == 0 {
			return 0
		}
		kb, err := strconv.ParseInt(string(fields[0]), 10, 64)
		if err != nil {
			return 0
		}
		return kb << 10 // the kernel's "kB" is KiB
	}
	return 0
}

// openFDs counts /proc/self/fd (the count includes the directory's own
// descriptor while it is read); 0 where unavailable.
func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	return len(ents)
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// WriteSoak prints res as a short text report.
func WriteSoak(w io.Writer, res SoakResult) {
	fmt.Fprintf(w, "soak: %.0f s; %d calls, %d oneway, %d expected failures, %d reconnects, %d registry churns; %d unexpected errors",
		res.Seconds, res.Calls, res.Oneway, res.Failed, res.Reconnects, res.Churns, res.Errors)
	if res.FirstError != "" {
		fmt.Fprintf(w, " (first: %s)", res.FirstError)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "slopes over the second half (%d samples):\n", len(res.Samples)-len(res.Samples)/2)
	fmt.Fprintf(w, "  rss        %+9.3f MiB/min\n", res.RSSSlope/(1<<20))
	fmt.Fprintf(w, "  heap       %+9.3f MiB/min\n", res.HeapSlope/(1<<20))
	fmt.Fprintf(w, "  goroutines %+9.2f /min\n", res.GoroutineSlope)
	fmt.Fprintf(w, "  open fds   %+9.2f /min\n", res.FDSlope)
	fmt.Fprintf(w, "before / after (after GC, load stopped, clients and servers closed):\n")
	fmt.Fprintf(w, "  rss %.1f / %.1f MiB, heap %.1f / %.1f MiB, goroutines %d / %d, fds %d / %d\n",
		mib(res.Before.RSS), mib(res.After.RSS), mib(res.Before.Heap), mib(res.After.Heap),
		res.Before.Goroutines, res.After.Goroutines, res.Before.FDs, res.After.FDs)
}
