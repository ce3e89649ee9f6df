package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/server"
)

// Scenario overload (run by name only, not by all): a Fleet server in a
// child process (OverloadCommand; one per row, as the other scenarios run
// their servers apart from the load generator) whose handlers share a
// fixed resource, OverloadSlots slots
// each held OverloadCost per call (a server with a capacity of about
// OverloadSlots / OverloadCost calls per second; a handler waiting for a
// slot gives up when its call's deadline passes). Measured in one run:
//
//   - uncongested: OverloadSlots closed-loop callers (no queueing): the
//     reference p99;
//   - peak: 4 × OverloadSlots closed-loop callers; the better goodput of
//     this and the uncongested run is the peak throughput, taken as the
//     server's capacity;
//   - 2x, no limit and 2x, adaptive limit: an open-loop load offering
//     twice the peak (calls issued at a fixed rate, whatever the answers,
//     paced every 200 µs; see openLoop),
//     each call with deadline OverloadDeadline, against a server without
//     and with server.WithAdaptiveLimit (defaults). Goodput is the calls
//     that succeeded per second of offered load; the p99 is over those
//     calls; shed calls are the ResourceExhausted answers carrying the
//     retry-after hint.
//
// The closed-loop calls have no deadline. Both servers lift the per-connection concurrency cap
// (WithMaxConcurrentPerConn) so that only the limiter under test sheds.
//
// On a shared machine the load of other jobs changes over seconds, so the
// four rows are not run one after the other: the run is split into rounds
// (OverloadDuration / 2 s of them, at least one), each running the four in
// turn for a slice of OverloadDuration / rounds (the open-loop rows
// offering twice the peak measured so far), and each row pools its
// slices. Each row keeps one server (and limiter) for the whole run.

// overloadSlice is the shortest slice of a row in a round: long enough
// (twice OverloadDeadline) for a queue without a limit to reach the
// deadline.
const overloadSlice = 2 * OverloadDeadline

// ScenarioOverload names the overload scenario.
const ScenarioOverload = "overload"

// OverloadSlots and OverloadCost define the simulated capacity of the
// overload scenario's handlers.
const (
	OverloadSlots    = 4
	OverloadCost     = time.Millisecond
	OverloadDeadline = time.Second
)

// OverloadResult is one row of the overload scenario.
type OverloadResult struct {
	Test    string  `json:"test"`
	Offered float64 `json:"offered_per_sec,omitempty"` // open-loop rows: calls issued per second
	Callers int     `json:"callers,omitempty"`         // closed-loop rows
	Calls   int64   `json:"calls"`
	OK      int64   `json:"ok"`
	Shed    int64   `json:"shed"`   // ResourceExhausted with the retry-after hint
	Failed  int64   `json:"failed"` // any other error (deadline exceeded mostly)
	Seconds float64 `json:"seconds"`
	Goodput float64 `json:"goodput_per_sec"` // successful calls per second
	Latency Latency `json:"latency"`         // of the successful calls
	Limit   int     `json:"final_limit,omitempty"`
	// MeanLimit is the adaptive limit averaged over the row's time
	// (sampled every millisecond).
	MeanLimit float64 `json:"mean_limit,omitempty"`
	// SlotsBusy is the share of the row's time the handlers' slots were
	// held, all slots together (1: always all held); SlotHold is the mean
	// time a slot was held per call (OverloadCost plus the sleep's
	// overshoot on a busy machine).
	SlotsBusy float64       `json:"slots_busy"`
	SlotHold  time.Duration `json:"slot_hold_ns"`
	Rounds    int           `json:"rounds,omitempty"`
}

// overloadServer serves Work.Do (in the child process of overloadMain).
type overloadServer struct {
	srv   *server.Server
	addr  string
	done  chan struct{}
	busy  atomic.Int64 // nanoseconds the slots were held, all slots together
	holds atomic.Int64 // times a slot was held
	// running is the handlers running (waiting for a slot or holding
	// one).
	running atomic.Int64
}

func startOverloadServer(opts ...server.Option) (*overloadServer, error) {
	slots := make(chan struct{}, OverloadSlots)
	srv := server.New(append([]server.Option{server.WithMaxConcurrentPerConn(1 << 20)}, opts...)...)
	s := &overloadServer{srv: srv, done: make(chan struct{})}
	err := srv.RegisterFunction("Work", "Do", func(ctx context.Context, in *int, out *int) error {
		s.running.Add(1)
		defer s.running.Add(-1)
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return fleet.FromContextError(ctx.Err())
		}
		start := time.Now()
		time.Sleep(OverloadCost)
		s.busy.Add(int64(time.Since(start)))
		s.holds.Add(1)
		<-slots
		*out = *in
		return nil
	})
	if err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.addr = lis.Addr().String()
	go func() { defer close(s.done); _ = srv.Serve(lis) }()
	return s, nil
}

func (s *overloadServer) close() { s.srv.Close(); <-s.done }

// overloadTally counts the outcomes of calls.
type overloadTally struct {
	mu      sync.Mutex
	samples []time.Duration
	calls   atomic.Int64
	ok      atomic.Int64
	shed    atomic.Int64
	failed  atomic.Int64
}

// call makes one call, with deadline when it is positive.
func (t *overloadTally) call(ctx context.Context, c *client.Client, i int, deadline time.Duration) {
	if deadline > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, deadline)
		defer cancel()
	}
	start := time.Now()
	var out int
	err := c.Call(ctx, "Work", "Do", i, &out)
	d := time.Since(start)
	t.calls.Add(1)
	switch {
	case err == nil:
		t.ok.Add(1)
		t.mu.Lock()
		t.samples = append(t.samples, d)
		t.mu.Unlock()
	case errors.Is(err, client.ErrShed):
		t.shed.Add(1)
	default:
		t.failed.Add(1)
	}
}

func (t *overloadTally) result(test string, elapsed time.Duration) OverloadResult {
	t.mu.Lock()
	defer t.mu.Unlock()
	return OverloadResult{
		Test: test, Calls: t.calls.Load(), OK: t.ok.Load(), Shed: t.shed.Load(), Failed: t.failed.Load(),
		Seconds: elapsed.Seconds(), Goodput: float64(t.ok.Load()) / elapsed.Seconds(), Latency: summarize(t.samples),
	}
}

// closedLoop runs callers goroutines calling back to back for d (each
// makes at least one call), counting into t; the calls have no deadline.
func closedLoop(ctx context.Context, t *overloadTally, c *client.Client, callers int, d time.Duration) time.Duration {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i == 0 || ctx.Err() == nil; i++ {
				t.call(context.Background(), c, w+i, 0)
			}
		}()
	}
	wg.Wait()
	return time.Since(start)
}

// openLoop issues calls at rate per second for d, each on its own
// goroutine, counting into t, and waits for them all (each is bounded by
// its deadline). It wakes every 200 µs (by the pacer: with time.Sleep it
// woke about every 1.08 ms) and issues the calls then due, so arrivals
// come one or two at a time rather than in bursts. The elapsed time
// returned runs until the last call ended, so calls that queued past d
// count over the time they took.
func openLoop(ctx context.Context, t *overloadTally, c *client.Client, rate float64, d time.Duration) time.Duration {
	interval := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	var wg sync.WaitGroup
	issued := 0
	p := newPacer()
	defer p.stop()
	for ctx.Err() == nil {
		now := time.Since(start)
		if now >= d {
			break
		}
		for due := int(now / interval); issued <= due; issued++ {
			wg.Add(1)
			go func(i int) { defer wg.Done(); t.call(ctx, c, i, OverloadDeadline) }(issued)
		}
		p.sleep(200 * time.Microsecond)
	}
	wg.Wait()
	return time.Since(start)
}

// overloadRow is one row of the overload scenario over the run: its
// server, client and pooled counts.
type overloadRow struct {
	test    string
	srv     *overloadProc
	c       *client.Client
	tally   overloadTally
	elapsed time.Duration
	offered float64 // sum over the rounds of the rate offered
}

func (r *runner) overload(ctx context.Context) error {
	d := r.set.OverloadDuration
	if d <= 0 {
		d = 3 * time.Second
	}
	rounds := max(1, int(d/overloadSlice))
	slice := d / time.Duration(rounds)
	rows := []*overloadRow{{test: "uncongested"}, {test: "peak"}, {test: "2x, no limit"}, {test: "2x, adaptive limit"}}
	for i, w := range rows {
		s, err := startOverloadProc(r.o.Launch, w.test, i == 3, r.set.ChildMaxTime)
		if err != nil {
			return err
		}
		defer s.stop()
		c, err := client.Dial(ctx, "tcp", s.addr, client.WithWriteTimeout(0))
		if err != nil {
			return err
		}
		defer c.Close()
		w.srv, w.c = s, c
	}
	goodput := func(w *overloadRow) float64 {
		if w.elapsed <= 0 {
			return 0
		}
		return float64(w.tally.ok.Load()) / w.elapsed.Seconds()
	}
	for round := range rounds {
		for i, w := range rows {
			r.prog.note(fmt.Sprintf("overload %s (round %d of %d)", w.test, round+1, rounds))
			switch i {
			case 0:
				w.elapsed += closedLoop(ctx, &w.tally, w.c, OverloadSlots, slice)
			case 1:
				w.elapsed += closedLoop(ctx, &w.tally, w.c, 4*OverloadSlots, slice)
			default:
				// The peak is the best closed-loop goodput so far (on a
				// shared machine the 4-caller run may do better than the
				// 16-caller one).
				peak := max(goodput(rows[0]), goodput(rows[1]))
				if peak <= 0 {
					return fmt.Errorf("overload: no call succeeded at peak")
				}
				if err := w.srv.sample(true); err != nil {
					return err
				}
				w.elapsed += openLoop(ctx, &w.tally, w.c, 2*peak, slice)
				if err := w.srv.sample(false); err != nil {
					return err
				}
				// A call the client gave up on may still run on the
				// server a little longer: let it end before the next
				// row's slice.
				for wait := time.Now(); time.Since(wait) < 2*OverloadDeadline; time.Sleep(5 * time.Millisecond) {
					st, err := w.srv.stats()
					if err != nil {
						return err
					}
					if st.running == 0 {
						break
					}
				}
				w.offered += 2 * peak
			}
			if err := ctx.Err(); err != nil {
				return err
			}
		}
	}
	for i, w := range rows {
		res := w.tally.result(w.test, w.elapsed)
		res.Rounds = rounds
		switch i {
		case 0:
			res.Callers = OverloadSlots
		case 1:
			res.Callers = 4 * OverloadSlots
		default:
			res.Offered = w.offered / float64(rounds)
		}
		st, err := w.srv.stats()
		if err != nil {
			return err
		}
		res.Limit = st.limit
		if st.holds > 0 {
			res.SlotsBusy = st.busy.Seconds() / (OverloadSlots * w.elapsed.Seconds())
			res.SlotHold = st.busy / time.Duration(st.holds)
		}
		if st.samples > 0 && res.Limit > 0 {
			res.MeanLimit = st.limitSum / float64(st.samples)
		}
		r.rep.Overload = append(r.rep.Overload, res)
	}
	return nil
}

func (r *runner) overloadTable() *table {
	t := &table{left: 1, head: []string{"test", "offered/s", "goodput/s", "goodput ÷ peak", "shed %", "failed %", "p50 ms", "p99 ms", "p99 ÷ uncongested p99", "slots busy %", "slot hold ms", "mean limit", "final limit"}}
	var peak float64
	var p99 time.Duration
	for _, o := range r.rep.Overload {
		switch o.Test {
		case "peak", "uncongested":
			peak = max(peak, o.Goodput)
			if o.Test == "uncongested" {
				p99 = o.Latency.P99
			}
		}
	}
	pct := func(n, of int64) string {
		if of == 0 {
			return "—"
		}
		return sig(100 * float64(n) / float64(of))
	}
	for _, o := range r.rep.Overload {
		offered := "closed loop, " + num(float64(o.Callers)) + " callers"
		if o.Offered > 0 {
			offered = num(o.Offered)
		}
		gp, lr := "—", "—"
		if peak > 0 {
			gp = sig(o.Goodput / peak)
		}
		if p99 > 0 && o.Latency.P99 > 0 {
			lr = sig(float64(o.Latency.P99) / float64(p99))
		}
		limit, mean := "—", "—"
		if o.Limit > 0 {
			limit = num(float64(o.Limit))
		}
		if o.MeanLimit > 0 {
			mean = sig(o.MeanLimit)
		}
		t.add(o.Test, offered, num(o.Goodput), gp, pct(o.Shed, o.Calls), pct(o.Failed, o.Calls), ms(o.Latency.P50), ms(o.Latency.P99), lr, sig(100*o.SlotsBusy), ms(o.SlotHold), mean, limit)
	}
	t.note("goodput ÷ peak: against the best closed-loop goodput (%s calls/s)", num(peak))
	if n := len(r.rep.Overload); n > 0 && r.rep.Overload[0].Rounds > 1 {
		t.note("each row pools %d slices of %.1f s, the four rows taking turns (round-robin) so that they share the machine's load", r.rep.Overload[0].Rounds, r.rep.Overload[0].Seconds/float64(r.rep.Overload[0].Rounds))
	}
	if capacity := float64(OverloadSlots) / OverloadCost.Seconds(); peak < 0.8*capacity {
		var busy float64
		var hold time.Duration
		for _, o := range r.rep.Overload {
			if (o.Test == "peak" || o.Test == "uncongested") && o.SlotsBusy > busy {
				busy, hold = o.SlotsBusy, o.SlotHold
			}
		}
		if busy >= 0.95 {
			t.note("the peak is %.0f %% of the handlers' nominal capacity although the slots were %.0f %% busy: each %v sleep held its slot %s ms (the handlers wake late), so the capacity is %d ÷ slot hold; a row whose slot hold grows (more goroutines to wake, shed calls to answer) loses goodput in proportion", 100*peak/capacity, 100*busy, OverloadCost, ms(hold), OverloadSlots)
		} else {
			t.note("the peak is %.0f %% of the handlers' capacity with the slots %.0f %% busy: the run was bound by CPU (the load generator, client and server share the machine), not by the slots, so shed calls take CPU from admitted ones", 100*peak/capacity, 100*busy)
		}
	}
	t.note("slots busy: the share of the row's time the %d slots were held; slot hold: the mean time a call held one (%v asked, more when the machine is slow to wake the handler)", OverloadSlots, OverloadCost)
	t.note("handlers share %d slots each held %v (capacity about %s calls/s); open-loop calls have a %v deadline", OverloadSlots, OverloadCost, num(float64(OverloadSlots)/OverloadCost.Seconds()), OverloadDeadline)
	return t
}
