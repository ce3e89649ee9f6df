package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/selector"
	"github.com/sony/gobreaker/v2"
	"google.golang.org/protobuf/proto"
)

// FailMode says what an XClient does when a call fails.
type FailMode int

// The fail modes.
const (
	// Failover retries on another server (the default).
	Failover FailMode = iota
	// Failfast returns the first error.
	Failfast
	// Failtry retries on the same server.
	Failtry
	// Failbackup sends a backup request to a second server when the first
	// has not answered within the backup delay, and takes the first reply.
	Failbackup
)

// ParseFailMode maps "failover", "failfast", "failtry" and "failbackup" to
// their FailMode.
func ParseFailMode(s string) (FailMode, error) {
	switch s {
	case "failover":
		return Failover, nil
	case "failfast":
		return Failfast, nil
	case "failtry":
		return Failtry, nil
	case "failbackup":
		return Failbackup, nil
	}
	return 0, fmt.Errorf("client: unknown fail mode %q (failover, failfast, failtry, failbackup)", s)
}

// Governance errors; each matches with errors.Is.
var (
	// ErrNoServer: discovery lists no server that can take the call.
	ErrNoServer = fleet.NewError(fleet.Unavailable, "no server available")
	// ErrBudgetExhausted is wrapped when a retry was refused by the
	// retry budget.
	ErrBudgetExhausted = errors.New("retry budget exhausted")
)

// XOption configures an XClient.
type XOption interface{ applyX(*xoptions) }

type xoptionFunc func(*xoptions)

func (f xoptionFunc) applyX(o *xoptions) { f(o) }

type xoptions struct {
	sel          selector.Selector
	filters      []selector.Filter
	failMode     FailMode
	maxAttempts  int
	backoffBase  time.Duration
	backoffMax   time.Duration
	budget       *RetryBudget
	breaker      *gobreaker.Settings
	backupDelay  time.Duration
	idempotent   map[string]bool
	clientOpts   []Option
	downFor      time.Duration
	drainTimeout time.Duration
}

// WithSelector chooses servers with sel. Default: selector.NewP2C (latency
// aware power of two choices).
func WithSelector(sel selector.Selector) XOption {
	return xoptionFunc(func(o *xoptions) { o.sel = sel })
}

// WithFilters keeps only the servers every filter accepts (group, version,
// tags). Default: all servers.
func WithFilters(f ...selector.Filter) XOption {
	return xoptionFunc(func(o *xoptions) { o.filters = append(o.filters, f...) })
}

// WithFailMode sets the fail mode. Default Failover.
func WithFailMode(m FailMode) XOption { return xoptionFunc(func(o *xoptions) { o.failMode = m }) }

// WithMaxAttempts bounds the attempts of one call, the first included.
// Default 3.
func WithMaxAttempts(n int) XOption {
	return xoptionFunc(func(o *xoptions) { o.maxAttempts = max(1, n) })
}

// WithBackoff sets the retry backoff: before retry k the client sleeps a
// random time in [0, min(max, base·2^(k-1))] ("full jitter"). The first
// failover retry goes to another server at once. Default 5 ms and 500 ms.
func WithBackoff(base, max time.Duration) XOption {
	return xoptionFunc(func(o *xoptions) { o.backoffBase, o.backoffMax = base, max })
}

// WithRetryBudget replaces the retry budget. Default NewRetryBudget(0.1,
// 10, 10*time.Second): retries at most 10% of calls over 10 s.
func WithRetryBudget(b *RetryBudget) XOption { return xoptionFunc(func(o *xoptions) { o.budget = b }) }

// WithBreaker sets the per-server circuit breaker settings
// (github.com/sony/gobreaker). Default: trip after 5 consecutive server
// failures, probe again after 5 s with one request.
func WithBreaker(st gobreaker.Settings) XOption {
	return xoptionFunc(func(o *xoptions) { o.breaker = &st })
}

// WithBackupDelay sets Failbackup's delay before the backup request.
// Default 0: the observed p95 latency (10 ms until enough calls are seen).
func WithBackupDelay(d time.Duration) XOption {
	return xoptionFunc(func(o *xoptions) { o.backupDelay = d })
}

// WithIdempotent marks methods safe to run twice: their calls are also
// retried after the request was sent (a lost connection, DeadlineExceeded
// of an attempt is not retried since it spends the caller's deadline).
// Default: none; only calls that certainly did not run are retried.
func WithIdempotent(methods ...string) XOption {
	return xoptionFunc(func(o *xoptions) {
		for _, m := range methods {
			o.idempotent[m] = true
		}
	})
}

// WithClientOptions sets the options of each server connection.
func WithClientOptions(opts ...Option) XOption {
	return xoptionFunc(func(o *xoptions) { o.clientOpts = append(o.clientOpts, opts...) })
}

// WithDownTime sets how long a server whose connection failed or could
// not be dialled is skipped before it is tried again. Default 1 s.
func WithDownTime(d time.Duration) XOption { return xoptionFunc(func(o *xoptions) { o.downFor = d }) }

// XClient calls one service over the servers a Discovery lists: it picks a
// server per call with a Selector, keeps one lazily dialled connection per
// server (closed when the server leaves discovery and its calls finish),
// skips servers whose connection failed or whose circuit breaker is open,
// and retries by its FailMode within the call's deadline and a retry
// budget. Safe for concurrent use.
type XClient struct {
	service string
	disc    registry.Discovery
	opts    xoptions
	sel     selector.Selector
	obs     selector.Observer

	endpoints atomic.Pointer[map[string]*endpoint]
	mu        sync.Mutex // serialises updates of endpoints
	ready     chan struct{}
	readyOnce sync.Once
	cancel    context.CancelFunc
	watchDone chan struct{}
	lat       latencyWindow
	pool      sync.Pool
}

type endpoint struct {
	inst      registry.Instance
	key       string
	breaker   *gobreaker.TwoStepCircuitBreaker[struct{}]
	downUntil atomic.Int64 // unix nanoseconds; skipped until then
	mu        sync.Mutex
	c         *Client
	removed   bool
}

// NewXClient returns an XClient for service over the servers disc lists.
// It starts watching at once and returns after the first list arrives or
// after a second, whichever is first (calls made before any server is
// known wait for the first list, bounded by their context).
func NewXClient(service string, disc registry.Discovery, opts ...XOption) (*XClient, error) {
	o := xoptions{
		failMode: Failover, maxAttempts: 3,
		backoffBase: 5 * time.Millisecond, backoffMax: 500 * time.Millisecond,
		idempotent: map[string]bool{}, downFor: time.Second, drainTimeout: 30 * time.Second,
	}
	for _, op := range opts {
		op.applyX(&o)
	}
	if o.sel == nil {
		o.sel = selector.NewP2C(selector.Config{})
	}
	if o.budget == nil {
		o.budget = NewRetryBudget(0.1, 10, 10*time.Second)
	}
	x := &XClient{service: service, disc: disc, opts: o, ready: make(chan struct{}), watchDone: make(chan struct{})}
	x.sel = o.sel
	if len(o.filters) > 0 {
		x.sel = selector.Filtered(o.sel, o.filters...)
	}
	x.obs, _ = x.sel.(selector.Observer)
	empty := map[string]*endpoint{}
	x.endpoints.Store(&empty)
	x.pool.New = func() any {
		a := &attempt{x: x}
		a.pick.Exclude = a.exclude
		return a
	}
	ctx, cancel := context.WithCancel(context.Background())
	x.cancel = cancel
	ch, err := disc.Watch(ctx, service)
	if err != nil {
		cancel()
		return nil, fleet.Errorf(fleet.Unavailable, "watch %s: %w", service, err)
	}
	go x.watch(ch)
	select {
	case <-x.ready:
	case <-time.After(time.Second):
	}
	return x, nil
}

func (x *XClient) watch(ch <-chan []registry.Instance) {
	defer close(x.watchDone)
	for list := range ch {
		x.update(list)
	}
}

// update applies a new server list: the selector's snapshot and the
// endpoint table. Servers that left are closed once their calls finish.
func (x *XClient) update(list []registry.Instance) {
	x.mu.Lock()
	defer x.mu.Unlock()
	old := *x.endpoints.Load()
	next := make(map[string]*endpoint, len(list))
	for _, in := range list {
		k := in.Key()
		if ep, ok := old[k]; ok {
			ep.mu.Lock()
			ep.inst = in
			ep.mu.Unlock()
			next[k] = ep
			continue
		}
		next[k] = x.newEndpoint(in)
	}
	x.endpoints.Store(&next)
	x.sel.Update(list)
	for k, ep := range old {
		if _, ok := next[k]; !ok {
			go ep.retire(x.opts.drainTimeout)
		}
	}
	if len(list) > 0 {
		x.readyOnce.Do(func() { close(x.ready) })
	}
}

func (x *XClient) newEndpoint(in registry.Instance) *endpoint {
	ep := &endpoint{inst: in, key: in.Key()}
	st := gobreaker.Settings{
		Name:        in.Key(),
		MaxRequests: 1,
		Timeout:     5 * time.Second,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 5 },
	}
	if x.opts.breaker != nil {
		st = *x.opts.breaker
		st.Name = in.Key()
	}
	st.IsSuccessful = func(err error) bool { return !serverFailure(err) }
	ep.breaker = gobreaker.NewTwoStepCircuitBreaker[struct{}](st)
	return ep
}

// serverFailure reports whether err says the server is unhealthy, as
// opposed to the call itself being refused or cancelled.
func serverFailure(err error) bool {
	switch fleet.CodeOf(err) {
	case fleet.Unavailable, fleet.ShuttingDown, fleet.DeadlineExceeded, fleet.Internal:
		return true
	}
	return false
}

// retire closes the endpoint's connection once its pending calls finish
// (bounded by timeout).
func (ep *endpoint) retire(timeout time.Duration) {
	ep.mu.Lock()
	ep.removed = true
	c := ep.c
	ep.c = nil
	ep.mu.Unlock()
	if c == nil {
		return
	}
	deadline := time.Now().Add(timeout)
	for c.Pending() > 0 && time.Now().Before(deadline) {
		select {
		case <-c.Done():
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
	c.Close()
}

// usable reports whether the endpoint may be chosen now.
func (ep *endpoint) usable(now int64) bool {
	if ep.downUntil.Load() > now {
		return false
	}
	if ep.breaker.State() == gobreaker.StateOpen {
		return false
	}
	ep.mu.Lock()
	c := ep.c
	ep.mu.Unlock()
	return c == nil || (c.Err() == nil && !c.Draining())
}

// client returns the endpoint's connection, dialling it if needed.
func (x *XClient) client(ctx context.Context, ep *endpoint) (*Client, error) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if ep.removed {
		return nil, errLeft
	}
	if ep.c != nil && ep.c.Err() == nil && !ep.c.Draining() {
		return ep.c, nil
	}
	if ep.c != nil {
		go ep.c.Close()
		ep.c = nil
	}
	network, addr := instanceNetwork(ep.inst)
	c, err := Dial(ctx, network, addr, x.opts.clientOpts...)
	if err != nil {
		ep.markDown(x.opts.downFor)
		return nil, notSent(err)
	}
	ep.c = c
	go func() {
		<-c.Done()
		ep.mu.Lock()
		broken := ep.c == c && !ep.removed
		ep.mu.Unlock()
		if broken && !errors.Is(c.Err(), ErrClosed) {
			ep.markDown(x.opts.downFor)
		}
	}()
	return c, nil
}

func (ep *endpoint) markDown(d time.Duration) { ep.downUntil.Store(time.Now().Add(d).UnixNano()) }

// errLeft: the chosen server left discovery before the call was sent.
var errLeft = notSent(fleet.NewError(fleet.Unavailable, "server left discovery"))

// repick reports whether err means the chosen server was gone before the
// call was sent (it left discovery, or announced shutdown): choosing again
// is not a retry, whatever the fail mode.
func repick(err error) bool { return err == errLeft || errors.Is(err, ErrGoingAway) }

// attempt is the per-call selection state, pooled.
type attempt struct {
	x      *XClient
	pick   selector.Pick
	tried  [8]string
	ntried int
	strict bool // also skip servers that are down or tripped
	now    int64
	eps    map[string]*endpoint
}

func (a *attempt) exclude(key string) bool {
	for i := 0; i < a.ntried && i < len(a.tried); i++ {
		if a.tried[i] == key {
			return true
		}
	}
	if a.strict {
		if ep := a.eps[key]; ep == nil || !ep.usable(a.now) {
			return true
		}
	}
	return false
}

// choose picks a server not yet tried, preferring usable ones.
func (x *XClient) choose(ctx context.Context, a *attempt, method string) (*endpoint, error) {
	for try := 0; ; try++ {
		a.eps = *x.endpoints.Load()
		if len(a.eps) == 0 {
			select {
			case <-x.ready:
				return nil, notSent(ErrNoServer)
			case <-ctx.Done():
				return nil, fleet.FromContextError(ctx.Err())
			case <-x.watchDone:
				return nil, notSent(ErrClosed)
			}
		}
		a.pick.Service, a.pick.Method = x.service, method
		a.now = time.Now().UnixNano()
		a.strict = true
		key := x.sel.Select(&a.pick)
		if key == "" {
			a.strict = false
			key = x.sel.Select(&a.pick)
		}
		if key == "" {
			return nil, notSent(ErrNoServer)
		}
		if ep := a.eps[key]; ep != nil {
			return ep, nil
		}
		// The table moved between the selector's snapshot and ours (or a
		// selector returned a key it was never given): look again, a few
		// times at most.
		if try >= 3 {
			return nil, notSent(ErrNoServer)
		}
	}
}

// CallKey returns a context whose XClient calls use key for consistent
// hashing (selector.NewConsistentHash).
func CallKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, callKeyKey{}, key)
}

type callKeyKey struct{}

// Call calls service.method on one server chosen by the selector, retrying
// by the fail mode. Errors are those of Client.Call, or Unavailable
// wrapping ErrNoServer when no server can be chosen.
func (x *XClient) Call(ctx context.Context, method string, args, reply any) error {
	if x.opts.failMode == Failbackup {
		return x.backup(ctx, method, args, reply)
	}
	a := x.pool.Get().(*attempt)
	a.ntried = 0
	a.pick.Key, _ = ctx.Value(callKeyKey{}).(string)
	defer x.pool.Put(a)
	x.opts.budget.Call()
	var ep *endpoint
	var err error
	for i := 0; ; i++ {
		if ep == nil || x.opts.failMode != Failtry {
			if ep, err = x.choose(ctx, a, method); err != nil {
				return err
			}
		}
		err = x.callOne(ctx, ep, method, args, reply)
		for r := 0; r < 3 && repick(err) && ctx.Err() == nil; r++ {
			if ep, err = x.choose(ctx, a, method); err != nil {
				return err
			}
			err = x.callOne(ctx, ep, method, args, reply)
		}
		if err == nil || x.opts.failMode == Failfast || i+1 >= x.opts.maxAttempts || ctx.Err() != nil {
			return err
		}
		if !x.retryable(err, method) {
			return err
		}
		if !x.opts.budget.Retry() {
			return fmt.Errorf("%w (%w)", err, ErrBudgetExhausted)
		}
		if x.opts.failMode == Failover && a.ntried < len(a.tried) {
			a.tried[a.ntried] = ep.key
			a.ntried++
		}
		if i > 0 || x.opts.failMode == Failtry {
			if werr := x.sleep(ctx, i); werr != nil {
				return err
			}
		}
	}
}

// callOne makes one attempt on one server, feeding the breaker, the
// selector's observer and the latency window.
func (x *XClient) callOne(ctx context.Context, ep *endpoint, method string, args, reply any) error {
	done, berr := ep.breaker.Allow()
	if berr != nil {
		return notSent(fleet.Errorf(fleet.Unavailable, "circuit breaker open for %s: %w", ep.key, berr))
	}
	c, err := x.client(ctx, ep)
	if err != nil {
		if repick(err) {
			done(nil) // gone, not unhealthy
		} else {
			done(err)
		}
		return err
	}
	if x.obs != nil {
		x.obs.Begin(ep.key)
	}
	start := time.Now()
	err = c.Call(ctx, x.service, method, args, reply)
	d := time.Since(start)
	if x.obs != nil {
		var oerr error
		if serverFailure(err) {
			oerr = err
		}
		x.obs.End(ep.key, d, oerr)
	}
	if err == nil && x.opts.failMode == Failbackup {
		x.lat.add(d)
	}
	if fleet.CodeOf(err) == fleet.Canceled {
		done(nil) // the caller's choice says nothing of the server
	} else {
		done(err)
	}
	return err
}

// retryable: calls that certainly did not run are always retryable;
// calls of idempotent methods also after a lost connection or a server
// Unavailable.
func (x *XClient) retryable(err error, method string) bool {
	code := fleet.CodeOf(err)
	if code == fleet.ShuttingDown || errors.Is(err, ErrNotSent) {
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

func (x *XClient) sleep(ctx context.Context, retry int) error {
	ceiling := min(x.opts.backoffMax, x.opts.backoffBase<<min(retry, 20))
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

// backup implements Failbackup.
func (x *XClient) backup(ctx context.Context, method string, args, reply any) error {
	a := x.pool.Get().(*attempt)
	a.ntried = 0
	a.pick.Key, _ = ctx.Value(callKeyKey{}).(string)
	defer x.pool.Put(a)
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
	results := make(chan result, 2)
	launch := func(ep *endpoint) {
		r := newReply(reply)
		go func() { results <- result{r, x.callOne(ctx, ep, method, args, r)} }()
	}
	launch(first)
	delay := x.opts.backupDelay
	if delay <= 0 {
		delay = x.lat.p95(10 * time.Millisecond)
	}
	timer := time.NewTimer(delay)
	defer timer.Stop()
	outstanding := 1
	backupSent := false
	var lastErr error
	for outstanding > 0 {
		select {
		case <-timer.C:
			if !backupSent {
				backupSent = true
				a.tried[0], a.ntried = first.key, 1
				if ep, err := x.choose(ctx, a, method); err == nil && ep != first {
					launch(ep)
					outstanding++
				}
			}
		case r := <-results:
			outstanding--
			if r.err == nil {
				copyReply(reply, r.reply)
				return nil
			}
			lastErr = r.err
			if !backupSent && x.retryable(r.err, method) {
				// The first failed fast: send the backup now.
				timer.Reset(0)
			}
		}
	}
	return lastErr
}

// Broadcast calls method on every server at once. It succeeds only if all
// succeed; the reply is one of theirs. Otherwise it returns one of the
// errors.
func (x *XClient) Broadcast(ctx context.Context, method string, args, reply any) error {
	results, err := x.all(ctx, method, args, reply)
	if err != nil {
		return err
	}
	var firstErr error
	var ok any
	for _, r := range results {
		if r.err != nil && firstErr == nil {
			firstErr = r.err
		} else if r.err == nil && ok == nil {
			ok = r.reply
		}
	}
	if firstErr != nil {
		return firstErr
	}
	copyReply(reply, ok)
	return nil
}

// Fork calls method on every server at once and returns with the first
// successful reply; it fails only if all fail.
func (x *XClient) Fork(ctx context.Context, method string, args, reply any) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	eps := x.sortedEndpoints()
	if len(eps) == 0 {
		return notSent(ErrNoServer)
	}
	type result struct {
		reply any
		err   error
	}
	ch := make(chan result, len(eps))
	for _, ep := range eps {
		r := newReply(reply)
		go func() { ch <- result{r, x.callOne(ctx, ep, method, args, r)} }()
	}
	var lastErr error
	for range eps {
		r := <-ch
		if r.err == nil {
			copyReply(reply, r.reply)
			return nil
		}
		lastErr = r.err
	}
	return lastErr
}

type fanResult struct {
	reply any
	err   error
}

func (x *XClient) all(ctx context.Context, method string, args, reply any) ([]fanResult, error) {
	eps := x.sortedEndpoints()
	if len(eps) == 0 {
		return nil, notSent(ErrNoServer)
	}
	out := make([]fanResult, len(eps))
	var wg sync.WaitGroup
	for i, ep := range eps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := newReply(reply)
			out[i] = fanResult{r, x.callOne(ctx, ep, method, args, r)}
		}()
	}
	wg.Wait()
	return out, nil
}

func (x *XClient) sortedEndpoints() []*endpoint {
	m := *x.endpoints.Load()
	eps := make([]*endpoint, 0, len(m))
	for _, ep := range m {
		eps = append(eps, ep)
	}
	sort.Slice(eps, func(i, j int) bool { return eps[i].key < eps[j].key })
	return eps
}

// Servers returns the keys of the servers currently listed, sorted.
func (x *XClient) Servers() []string {
	eps := x.sortedEndpoints()
	keys := make([]string, len(eps))
	for i, ep := range eps {
		keys[i] = ep.key
	}
	return keys
}

// Close stops watching discovery and closes every connection. It does not
// close the Discovery.
func (x *XClient) Close() error {
	x.cancel()
	<-x.watchDone
	x.mu.Lock()
	eps := *x.endpoints.Load()
	empty := map[string]*endpoint{}
	x.endpoints.Store(&empty)
	x.mu.Unlock()
	for _, ep := range eps {
		ep.mu.Lock()
		ep.removed = true
		c := ep.c
		ep.c = nil
		ep.mu.Unlock()
		if c != nil {
			c.Close()
		}
	}
	return nil
}

// newReply returns a fresh value of reply's type (a pointer), or nil.
func newReply(reply any) any {
	if reply == nil {
		return nil
	}
	return reflect.New(reflect.TypeOf(reply).Elem()).Interface()
}

// copyReply copies *src into *dst (proto.Merge for messages).
func copyReply(dst, src any) {
	if dst == nil || src == nil {
		return
	}
	if dm, ok := dst.(proto.Message); ok {
		proto.Reset(dm)
		proto.Merge(dm, src.(proto.Message))
		return
	}
	reflect.ValueOf(dst).Elem().Set(reflect.ValueOf(src).Elem())
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
