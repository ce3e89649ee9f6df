package client

import (
	"context"
	"errors"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetrpc/fleet"
)

// retryable: calls that certainly did not run (not sent, refused by a
// server shutting down, shed by an overloaded one) are always retryable;
// calls of idempotent methods also after a lost connection or a server
// Unavailable.
func (x *XClient) retryable(err error, method string) bool {
	code := fleet.CodeOf(err)
	if code == fleet.ShuttingDown || errors.Is(err, ErrNotSent) || errors.Is(err, ErrShed) {
		return true
	}
	if code == fleet.Unavailable {
		if !errors.Is(err, ErrConnectionLost) {
			return true // the server refused it unprocessed
		}
		return x.opts.idempotent[method]
	}
	return false
}

func (x *XClient) sleep(ctx context.Context, s *callSettings, retry int) error {
	ceiling := min(s.backoffMax, s.backoffBase<<min(retry, 20))
	if ceiling <= 0 {
		return nil
	}
	t := time.NewTimer(rand.N(ceiling + 1))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// backup implements Failbackup and a policy's hedging: it sends the call
// to one server, then to another each s.hedge.Delay (or at once when the
// previous one failed with a retryable error) while no reply arrived, up
// to s.hedge.MaxAttempts servers, and returns the first success, or the
// last error once every attempt failed.
func (x *XClient) backup(ctx context.Context, s *callSettings, method string, args, reply any) error {
	a := x.pool.Get().(*attempt)
	a.start(ctx, s)
	defer x.release(a)
	first, err := x.choose(ctx, a, method)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		reply any
		err   error
	}
	limit := max(1, s.hedge.MaxAttempts)
	results := make(chan result, limit)
	launch := func(ep *endpoint) {
		r := newReply(reply)
		if a.ntried < len(a.tried) {
			a.tried[a.ntried] = ep.key
			a.ntried++
		}
		sc := *s // attemptOne writes sc.injected
		go func() { results <- result{r, x.attemptOne(ctx, &sc, ep, method, args, r)} }()
	}
	launch(first)
	delay := s.hedge.Delay
	if delay <= 0 {
		delay = x.opts.backupDelay
	}
	if delay <= 0 {
		delay = x.lat.p95(10 * time.Millisecond)
	}
	timer := time.NewTimer(delay)
	defer timer.Stop()
	outstanding, sent := 1, 1
	var lastErr error
	for outstanding > 0 {
		select {
		case <-timer.C:
			if sent < limit {
				if ep, err := x.choose(ctx, a, method); err == nil {
					if x.opts.observer != nil {
						x.opts.observer.OnBackup(x.service, method)
					}
					launch(ep)
					sent++
					outstanding++
					timer.Reset(delay)
				}
			}
		case r := <-results:
			outstanding--
			if r.err == nil {
				copyReply(reply, r.reply)
				return nil
			}
			lastErr = r.err
			if sent < limit && x.retryableFor(s, r.err, method) {
				// This one failed fast: send the next now.
				if ep, err := x.choose(ctx, a, method); err == nil {
					if x.opts.observer != nil {
						x.opts.observer.OnBackup(x.service, method)
					}
					launch(ep)
					sent++
					outstanding++
					timer.Reset(delay)
				}
			}
		}
	}
	return lastErr
}

// latencyWindow keeps recent successful latencies for the adaptive backup
// delay: the p95 of the last 256 samples, recomputed every 64 samples.
type latencyWindow struct {
	mu      sync.Mutex
	samples [256]time.Duration
	n       int
	cached  atomic.Int64
}

func (w *latencyWindow) add(d time.Duration) {
	w.mu.Lock()
	w.samples[w.n%len(w.samples)] = d
	w.n++
	if w.n%64 == 0 {
		count := min(w.n, len(w.samples))
		s := make([]time.Duration, count)
		copy(s, w.samples[:count])
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		w.cached.Store(int64(s[count*95/100]))
	}
	w.mu.Unlock()
}

func (w *latencyWindow) p95(def time.Duration) time.Duration {
	if v := w.cached.Load(); v > 0 {
		return time.Duration(v)
	}
	return def
}
