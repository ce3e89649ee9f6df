package server_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/internal/testutil"
	"github.com/fleetrpc/fleet/server"
)

// gatedServer serves Work.Do, whose handlers block until gate is closed,
// under an adaptive limit fixed at limit.
func gatedServer(t *testing.T, limit int) (srv *server.Server, addr string, gate chan struct{}, running, peak, handled *atomic.Int64) {
	return gatedServerWith(t, server.AdaptiveLimit{Initial: limit, Min: limit, Max: limit})
}

// gatedServerWith is gatedServer under the adaptive limit al, with opts.
// A call with a negative argument returns at once, without counting.
func gatedServerWith(t *testing.T, al server.AdaptiveLimit, opts ...server.Option) (srv *server.Server, addr string, gate chan struct{}, running, peak, handled *atomic.Int64) {
	running, peak, handled = new(atomic.Int64), new(atomic.Int64), new(atomic.Int64)
	gate = make(chan struct{})
	srv = server.New(append(opts, server.WithAdaptiveLimit(al))...)
	srv.RegisterFunction("Work", "Do", func(ctx context.Context, in *int, out *int) error {
		if *in < 0 {
			return nil
		}
		n := running.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		<-gate
		running.Add(-1)
		handled.Add(1)
		*out = *in
		return nil
	})
	return srv, testutil.Serve(t, srv), gate, running, peak, handled
}

// burst is n concurrent calls of Work.Do, each counted as ok, shed
// (ResourceExhausted, whose retry-after hint must be set) or other.
type burst struct {
	ok, shed, other atomic.Int64
	wg              sync.WaitGroup
	errs            chan string
}

// startBurst starts n calls on c.
func startBurst(c *client.Client, n int) *burst {
	b := &burst{errs: make(chan string, n)}
	for i := 0; i < n; i++ {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			var md fleet.Metadata
			var out int
			err := c.Call(fleet.WithResponseMetadata(context.Background(), &md), "Work", "Do", i, &out)
			switch {
			case err == nil:
				b.ok.Add(1)
			case fleet.CodeOf(err) == fleet.ResourceExhausted:
				b.shed.Add(1)
				if ms, perr := strconv.Atoi(md[server.RetryAfterKey]); perr != nil || ms < 1 {
					b.errs <- "shed call's retry-after = " + strconv.Quote(md[server.RetryAfterKey])
				}
			default:
				b.other.Add(1)
				b.errs <- err.Error()
			}
		}()
	}
	return b
}

// wait waits for every call to end and reports the unexpected outcomes.
func (b *burst) wait(t *testing.T) {
	t.Helper()
	b.wg.Wait()
	close(b.errs)
	for e := range b.errs {
		t.Error(e)
	}
}

// TestAdaptiveLimitShedsBurst: with the limit's slots held, every further
// call is answered ResourceExhausted with the retry-after hint and does not
// run; the admitted ones all complete; none is lost.
func TestAdaptiveLimitShedsBurst(t *testing.T) {
	const limit, calls = 8, 200
	srv, addr, gate, running, peak, handled := gatedServer(t, limit)
	b := startBurst(dial(t, addr), calls)
	// The gate holds the admitted calls, so the limit cannot move (no
	// samples) and every call past it is shed.
	waitFor(t, "the burst to be admitted or shed", func() bool {
		return running.Load() == limit && b.shed.Load()+b.other.Load() == calls-limit
	})
	close(gate)
	b.wait(t)
	if b.ok.Load() != limit || b.shed.Load() != calls-limit || b.other.Load() != 0 {
		t.Fatalf("ok %d shed %d other %d, want %d, %d, 0", b.ok.Load(), b.shed.Load(), b.other.Load(), limit, calls-limit)
	}
	if handled.Load() != limit || peak.Load() > limit {
		t.Fatalf("handlers ran %d (peak %d at once), want %d (at most %d)", handled.Load(), peak.Load(), limit, limit)
	}
	// A slot is released when its handler returns (before the response is
	// written): wait for the last ones.
	waitFor(t, "the slots to be released", func() bool { _, inflight, _ := srv.AdaptiveLimitState(); return inflight == 0 })
	if _, _, n := srv.AdaptiveLimitState(); n != calls-limit {
		t.Fatalf("AdaptiveLimitState: shed %d, want %d", n, calls-limit)
	}
}

// TestAdaptiveLimitOnewayWaits: oneway sends over the limit are not shed:
// the server stops reading until a slot frees, and every send runs.
func TestAdaptiveLimitOnewayWaits(t *testing.T) {
	const limit, sends = 8, 300
	srv, addr, gate, running, peak, handled := gatedServer(t, limit)
	c := dial(t, addr, client.WithWriteTimeout(0))
	for i := 0; i < sends; i++ {
		if err := c.Send(context.Background(), "Work", "Do", i); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	waitFor(t, "the limit's handlers to start", func() bool { return running.Load() == limit })
	close(gate)
	waitFor(t, "every oneway send to run", func() bool { return handled.Load() == sends })
	if p := peak.Load(); p > limit {
		t.Fatalf("%d handlers ran at once, over the limit %d", p, limit)
	}
	if _, _, shed := srv.AdaptiveLimitState(); shed != 0 {
		t.Fatalf("%d oneway sends shed", shed)
	}
}

// TestAdaptiveLimitOff: without the option the state is all zero.
func TestAdaptiveLimitOff(t *testing.T) {
	if l, i, s := server.New().AdaptiveLimitState(); l != 0 || i != 0 || s != 0 {
		t.Fatalf("AdaptiveLimitState = %d %d %d without the option", l, i, s)
	}
}
