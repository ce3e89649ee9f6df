package server_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/server"
)

// backlogServer is gatedServer under an adaptive limit fixed at limit
// with a backlog of backlog calls waiting at most timeout × the no-load
// latency. It makes one call with a negative argument first (it returns
// at once and gives the limiter its no-load latency, without which no
// call waits). Refused calls are reported to ref.
func backlogServer(t *testing.T, limit, backlog int, timeout float64) (srv *server.Server, addr string, gate chan struct{}, running, peak, handled *atomic.Int64, ref *refusals) {
	ref = &refusals{}
	srv, addr, gate, running, peak, handled = gatedServerWith(t, server.AdaptiveLimit{
		Initial: limit, Min: limit, Max: limit, Backlog: backlog, BacklogTimeout: timeout,
	}, server.WithPlugin(ref))
	c := dial(t, addr)
	var out int
	if err := c.Call(context.Background(), "Work", "Do", -1, &out); err != nil {
		t.Fatalf("warm-up call: %v", err)
	}
	waitFor(t, "the warm-up call's slot to be released", func() bool { _, inflight, _ := srv.AdaptiveLimitState(); return inflight == 0 })
	return srv, addr, gate, running, peak, handled, ref
}

// hugeWait is a BacklogTimeout (a multiple of the no-load latency) no test
// outlasts.
const hugeWait = 1e9

// fill starts limit calls on c and waits until their handlers hold the
// limit's slots; the returned WaitGroup ends when they have returned
// without error.
func fill(t *testing.T, c interface {
	Call(context.Context, string, string, any, any) error
}, limit int, running *atomic.Int64) *sync.WaitGroup {
	var wg sync.WaitGroup
	for i := 0; i < limit; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out int
			if err := c.Call(context.Background(), "Work", "Do", i, &out); err != nil {
				t.Errorf("admitted call %d: %v", i, err)
			}
		}()
	}
	waitFor(t, "the limit's slots to be held", func() bool { return running.Load() == int64(limit) })
	return &wg
}

// TestAdaptiveBacklogQueuesThenRuns: with a limit of N and a backlog of B,
// N + B + S concurrent calls to a blocked handler: N run, B wait, S are
// shed with ResourceExhausted and the retry-after hint; releasing the
// handlers runs the waiting ones, never more than N at once, and all N + B
// complete.
func TestAdaptiveBacklogQueuesThenRuns(t *testing.T) {
	const limit, backlog, extra = 4, 3, 5
	srv, addr, gate, running, peak, handled, _ := backlogServer(t, limit, backlog, hugeWait)
	b := startBurst(dial(t, addr), limit+backlog+extra)
	waitFor(t, "N running, B waiting, the rest shed", func() bool {
		return running.Load() == limit && srv.AdaptiveLimitWaiting() == backlog && b.shed.Load()+b.other.Load() == extra
	})
	if _, _, n := srv.AdaptiveLimitState(); n != extra {
		t.Fatalf("AdaptiveLimitState: shed %d, want %d", n, extra)
	}
	close(gate)
	b.wait(t)
	if b.ok.Load() != limit+backlog || b.shed.Load() != extra || b.other.Load() != 0 {
		t.Fatalf("ok %d shed %d other %d, want %d, %d, 0", b.ok.Load(), b.shed.Load(), b.other.Load(), limit+backlog, extra)
	}
	if handled.Load() != limit+backlog || peak.Load() > limit {
		t.Fatalf("handlers ran %d (peak %d at once), want %d (at most %d)", handled.Load(), peak.Load(), limit+backlog, limit)
	}
	if n := srv.AdaptiveLimitWaiting(); n != 0 {
		t.Fatalf("%d calls still waiting", n)
	}
}

// TestAdaptiveBacklogTimeoutSheds: a call whose wait bound passes before a
// slot frees leaves the backlog and is answered ResourceExhausted with the
// retry-after hint, counted as shed, and never runs.
func TestAdaptiveBacklogTimeoutSheds(t *testing.T) {
	const limit = 2
	srv, addr, gate, running, _, handled, ref := backlogServer(t, limit, 1, 1)
	c := dial(t, addr)
	wg := fill(t, c, limit, running)
	var md fleet.Metadata
	var out int
	err := c.Call(fleet.WithResponseMetadata(context.Background(), &md), "Work", "Do", 99, &out)
	if fleet.CodeOf(err) != fleet.ResourceExhausted {
		t.Fatalf("waiting call: %v, want resource_exhausted", err)
	}
	if ms, perr := strconv.Atoi(md[server.RetryAfterKey]); perr != nil || ms < 1 {
		t.Fatalf("retry-after = %q", md[server.RetryAfterKey])
	}
	if n := srv.AdaptiveLimitWaiting(); n != 0 {
		t.Fatalf("%d calls still waiting", n)
	}
	if _, _, n := srv.AdaptiveLimitState(); n != 1 {
		t.Fatalf("AdaptiveLimitState: shed %d, want 1", n)
	}
	close(gate)
	wg.Wait()
	if h := handled.Load(); h != limit {
		t.Fatalf("handlers ran %d, want %d (the timed-out call must not run)", h, limit)
	}
	if got := ref.list(); len(got) != 1 || got[0] != "Work.Do:resource_exhausted" {
		t.Fatalf("refusals = %q", got)
	}
}

// TestAdaptiveBacklogDeadline: a waiting call whose deadline passes leaves
// the backlog, is answered DeadlineExceeded (not counted as shed) and
// never runs.
func TestAdaptiveBacklogDeadline(t *testing.T) {
	const limit = 2
	srv, addr, gate, running, _, handled, ref := backlogServer(t, limit, 1, hugeWait)
	c := dial(t, addr)
	wg := fill(t, c, limit, running)
	// Long enough that the request surely leaves the client before its
	// deadline (a call whose deadline passed is not sent at all), even on
	// a loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var out int
	if err := c.Call(ctx, "Work", "Do", 99, &out); fleet.CodeOf(err) != fleet.DeadlineExceeded {
		t.Fatalf("waiting call: %v, want deadline_exceeded", err)
	}
	// The client gives up at its deadline too: the server's own answer
	// is the refused hook's.
	waitFor(t, "the server to answer the expired call", func() bool { return len(ref.list()) == 1 })
	if got := ref.list(); got[0] != "Work.Do:deadline_exceeded" {
		t.Fatalf("refusals = %q", got)
	}
	if n := srv.AdaptiveLimitWaiting(); n != 0 {
		t.Fatalf("%d calls still waiting", n)
	}
	close(gate)
	wg.Wait()
	if h := handled.Load(); h != limit {
		t.Fatalf("handlers ran %d, want %d (the expired call must not run)", h, limit)
	}
	if _, _, n := srv.AdaptiveLimitState(); n != 0 {
		t.Fatalf("AdaptiveLimitState: shed %d, want 0", n)
	}
}

// TestAdaptiveBacklogCancel: a waiting call the client cancels (a cancel
// frame) leaves the backlog, is answered Canceled and never runs.
func TestAdaptiveBacklogCancel(t *testing.T) {
	const limit = 2
	srv, addr, gate, running, _, handled, ref := backlogServer(t, limit, 1, hugeWait)
	c := dial(t, addr)
	wg := fill(t, c, limit, running)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		var out int
		done <- c.Call(ctx, "Work", "Do", 99, &out)
	}()
	waitFor(t, "the call to wait in the backlog", func() bool { return srv.AdaptiveLimitWaiting() == 1 })
	cancel()
	if err := <-done; fleet.CodeOf(err) != fleet.Canceled {
		t.Fatalf("cancelled call: %v, want canceled", err)
	}
	waitFor(t, "the cancelled call to leave the backlog", func() bool { return srv.AdaptiveLimitWaiting() == 0 })
	waitFor(t, "the server to answer the cancelled call", func() bool { return len(ref.list()) == 1 })
	if got := ref.list(); got[0] != "Work.Do:canceled" {
		t.Fatalf("refusals = %q", got)
	}
	close(gate)
	wg.Wait()
	if h := handled.Load(); h != limit {
		t.Fatalf("handlers ran %d, want %d (the cancelled call must not run)", h, limit)
	}
}

// TestAdaptiveBacklogShutdown: Shutdown answers the waiting calls
// ShuttingDown at once, while the running ones complete.
func TestAdaptiveBacklogShutdown(t *testing.T) {
	const limit, backlog = 2, 3
	srv, addr, gate, running, _, handled, _ := backlogServer(t, limit, backlog, hugeWait)
	c := dial(t, addr)
	wg := fill(t, c, limit, running)
	errs := make(chan error, backlog)
	for i := 0; i < backlog; i++ {
		go func() {
			var out int
			errs <- c.Call(context.Background(), "Work", "Do", 100+i, &out)
		}()
	}
	waitFor(t, "the calls to wait in the backlog", func() bool { return srv.AdaptiveLimitWaiting() == backlog })
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(context.Background()) }()
	for i := 0; i < backlog; i++ {
		if err := <-errs; fleet.CodeOf(err) != fleet.ShuttingDown {
			t.Fatalf("waiting call at Shutdown: %v, want shutting_down", err)
		}
	}
	close(gate)
	wg.Wait()
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if h := handled.Load(); h != limit {
		t.Fatalf("handlers ran %d, want %d", h, limit)
	}
}

func (r *refusals) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}
