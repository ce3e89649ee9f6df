package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/transport"
)

// ErrServerClosed is returned by Serve after Shutdown or Close.
var ErrServerClosed = errors.New("server: closed")

// Server serves registered services on any number of listeners. All its
// methods are safe for concurrent use; register services before serving.
type Server struct {
	opts  options
	hooks hooks

	services atomic.Pointer[map[string]*service] // copy-on-write
	// streamHandlers maps "service\x00method" to *streamHandler (stream.go).
	streamHandlers sync.Map
	regMu          sync.Mutex
	statuses       statuses     // set with SetServingStatus
	pubs           publications // what Publish registered (Publications)

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	onStop    []func(context.Context)

	mem      memBudget        // request bytes held by handlers, all connections
	admitted admitState       // open connections for the connection limits
	rate     *serverRate      // WithRateLimit; nil: off
	adaptive *adaptiveLimiter // WithAdaptiveLimit; nil: off
	stages   []admissionStage // for AdmissionStats, in pipeline order
	run      runFunc          // how an admitted call's handler is run (runner.go)

	// The per-method limits (methodlimits.go): an immutable table read
	// by admission, rebuilt under methodMu by SetMethodLimits; the
	// counters outlive the tables.
	methodLimits atomic.Pointer[methodTable]
	methodMu     sync.Mutex
	methodCtrs   map[rateKey]*methodCounter

	connCapRefused atomic.Uint64 // calls refused by WithMaxConcurrentPerConn
	connCapWaiting atomic.Int64  // oneway sends waiting for a slot under it
	shutdown       atomic.Bool   // refusing new calls and connections
	stopping       bool          // Shutdown or Close began; guarded by mu
	inflight       atomic.Int64  // handlers running, all connections
	calls          atomic.Uint64
	lat            latencyHist // handling time of calls, for Publish
	tasks          chan task
	idle           chan task    // handler goroutines waiting for work take from it
	idleN          atomic.Int64 // handler goroutines waiting on idle
	stopped        chan struct{}
	stopOnce       sync.Once

	inlineMu    sync.Mutex         // guards inlineConns
	inlineConns map[*conn]struct{} // connections that ran a call on their read loop (runInline)
	inlineMon   atomic.Bool        // inlineMonitor is running
}

// New returns a Server configured by opts.
func New(opts ...Option) *Server {
	s := &Server{
		opts:      defaultOptions(),
		listeners: map[net.Listener]struct{}{},
		conns:     map[*conn]struct{}{},
		stopped:   make(chan struct{}),
		idle:      make(chan task),
	}
	for _, o := range opts {
		o.apply(&s.opts)
	}
	s.opts.limits = s.opts.limits.WithDefaults()
	s.mem.max = s.opts.maxPending
	s.rate = newServerRate(&s.opts)
	s.setMethodLimitsLocked(s.opts.methodRates)
	if s.opts.adaptive != nil {
		s.adaptive = newAdaptiveLimiter(*s.opts.adaptive)
	}
	s.stages = s.admissionStages()
	for _, p := range s.opts.plugins {
		s.hooks.add(p)
	}
	empty := map[string]*service{}
	s.services.Store(&empty)
	s.run = s.runReused
	if s.opts.workers > 0 {
		s.tasks = make(chan task, s.opts.workers)
		for i := 0; i < s.opts.workers; i++ {
			go s.worker()
		}
		s.run = s.runPooled
	}
	return s
}

// Register publishes the exported methods of rcvr under the name of its
// type. It follows net/rpc's rules, so a type written for net/rpc registers
// unchanged: a method is served when it has one of the forms
//
//	func (t T) M(args A, reply *R) error                      // net/rpc form
//	func (t T) M(ctx context.Context, args A, reply *R) error // Fleet's form
//
// where the receiver is a value or a pointer (rcvr's method set decides, as
// in Go: a pointer rcvr has both), methods promoted from embedded fields
// count, A is any exported or built-in type taken by value or by pointer,
// and R is any exported or built-in type. Each call gets fresh args and a
// fresh reply; a map or slice reply starts empty, not nil, as in net/rpc.
// ctx carries the call's deadline, metadata and CallInfo.
//
// Every other exported method is skipped and logged at level Warn, with the
// reason, through the server's logger (WithLogger). Register returns an
// error when no method fits (naming each skipped method and why), when rcvr
// is nil or its type has no name, or when the name is taken. Unlike
// net/rpc, the type itself need not be exported.
//
// Methods registered this way are called through package reflect (one
// reflect.Value.Call per call); Handle registers a typed function without
// any reflection per call.
func (s *Server) Register(rcvr any) error { return s.RegisterName("", rcvr) }

// RegisterName is Register under a custom service name.
func (s *Server) RegisterName(name string, rcvr any) error {
	svc, err := newService(name, rcvr, s.opts.logger)
	if err != nil {
		return err
	}
	return s.addMethods(svc.name, svc.methods, false)
}

// RegisterFunction serves fn as service.method. fn has the form
// func(ctx context.Context, args A, reply *R) error or
// func(args A, reply *R) error, with A and R as for Register; it is called
// through package reflect (Handle is the typed alternative). The service
// may also hold methods registered by other calls. It fails when fn does
// not fit, saying why, or when service.method is taken.
func (s *Server) RegisterFunction(service, method string, fn any) error {
	m, err := newFunction(service, method, fn)
	if err != nil {
		return err
	}
	return s.addMethods(service, map[string]*methodType{method: m}, true)
}

// Alias makes service.alias call the already registered service.method.
func (s *Server) Alias(service, method, alias string) error {
	svc := (*s.services.Load())[service]
	if svc == nil || svc.methods[method] == nil {
		return fmt.Errorf("server: alias of unknown method %s.%s", service, method)
	}
	return s.addMethods(service, map[string]*methodType{alias: svc.methods[method]}, true)
}

func (s *Server) addMethods(name string, methods map[string]*methodType, merge bool) error {
	if name == "" {
		return errors.New("server: empty service name")
	}
	s.regMu.Lock()
	defer s.regMu.Unlock()
	old := *s.services.Load()
	prev := old[name]
	if prev != nil && !merge {
		return fmt.Errorf("server: service %q already registered", name)
	}
	ns := &service{name: name, methods: map[string]*methodType{}}
	if prev != nil {
		for k, v := range prev.methods {
			ns.methods[k] = v
		}
	}
	for k, v := range methods {
		if _, dup := ns.methods[k]; dup {
			return fmt.Errorf("server: method %s.%s already registered", name, k)
		}
		ns.methods[k] = v
	}
	for _, v := range methods {
		s.setChain(v)
	}
	for _, h := range s.hooks.register {
		if err := h.OnRegister(name, ns.methodNames()); err != nil {
			return err
		}
	}
	next := make(map[string]*service, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[name] = ns
	s.services.Store(&next)
	return nil
}

// Services returns the registered service names and their sorted unary
// methods (streaming methods are in StreamMethods), including services
// registered by other packages, such as fleet.Health (package
// server/health), fleet.Reflection (server/reflection) and fleet.Admin
// (server/admin). The map is the caller's. Safe for concurrent use.
func (s *Server) Services() map[string][]string {
	out := map[string][]string{}
	for name, svc := range *s.services.Load() {
		out[name] = svc.methodNames()
	}
	return out
}

// Listen opens a listener for network "tcp" (also "tcp4", "tcp6"),
// "unix" or "tls" (TCP with the WithTLS config) at addr, to pass to Serve.
// Any other network must be registered with package transport (importing
// github.com/fleetrpc/fleet/transport/kcp registers "kcp", for example);
// an unknown network fails with code InvalidArgument.
func (s *Server) Listen(network, addr string) (net.Listener, error) {
	if !transport.Builtin(network) {
		return listenTransport(network, addr)
	}
	switch network {
	case "tls":
		if s.opts.tls == nil {
			return nil, errors.New("server: network tls needs WithTLS")
		}
		return tls.Listen("tcp", addr, s.opts.tls)
	case "unix":
		if fi, err := os.Stat(addr); err == nil && fi.Mode()&os.ModeSocket != 0 {
			_ = os.Remove(addr) // a stale socket from an earlier run
		}
	}
	return net.Listen(network, addr)
}

// ListenAndServe listens on network and addr (see Listen) and serves.
func (s *Server) ListenAndServe(network, addr string) error {
	lis, err := s.Listen(network, addr)
	if err != nil {
		return err
	}
	return s.Serve(lis)
}

// Serve accepts connections on lis and serves each on its own goroutine
// until Shutdown or Close, then returns ErrServerClosed. It closes lis
// when it returns.
func (s *Server) Serve(lis net.Listener) error {
	s.mu.Lock()
	if s.shutdown.Load() {
		s.mu.Unlock()
		lis.Close()
		return ErrServerClosed
	}
	s.listeners[lis] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, lis)
		s.mu.Unlock()
		lis.Close()
	}()
	var backoff time.Duration
	for {
		nc, err := lis.Accept()
		if err != nil {
			if s.shutdown.Load() {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscallEMFILE) {
				backoff = min(max(backoff*2, 5*time.Millisecond), time.Second)
				s.opts.logger.Warn("fleet server: accept", "err", err, "retry_in", backoff)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		go s.serveConn(nc)
	}
}

// Addr returns the address of one of the server's listeners, or nil.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	for l := range s.listeners {
		return l.Addr()
	}
	return nil
}

// Load reports the handlers running now and the calls started since the
// server was made.
func (s *Server) Load() (inflight int64, calls uint64) {
	return s.inflight.Load(), s.calls.Load()
}

// OnShutdown registers fn to run at the start of Shutdown, before the
// listeners close (registry deregistration uses it). fn gets Shutdown's
// context.
func (s *Server) OnShutdown(fn func(ctx context.Context)) {
	s.mu.Lock()
	s.onStop = append(s.onStop, fn)
	s.mu.Unlock()
}

// Shutdown stops the server gracefully: it runs the OnShutdown functions,
// closes the listeners, tells every client to send no new calls (go-away),
// answers requests that still arrive with ShuttingDown (they did not run,
// so clients may retry them elsewhere), waits for the running handlers to
// finish and their responses to be written, and closes every connection.
// When ctx ends first it closes everything at once and returns ctx's error;
// handlers still running then see their contexts cancelled.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		select {
		case <-s.stopped:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.stopping = true
	stops := s.onStop
	s.mu.Unlock()
	// Still serving normally: deregistration lets clients move away first.
	for _, fn := range stops {
		fn(ctx)
	}
	s.mu.Lock()
	s.shutdown.Store(true)
	if s.adaptive != nil {
		s.adaptive.shutdown() // calls in its backlog: ShuttingDown
	}
	for l := range s.listeners {
		l.Close()
	}
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.goAway()
	}
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	var err error
wait:
	for s.inflight.Load() > 0 || !allAcked(conns) {
		select {
		case <-ctx.Done():
			err = ctx.Err()
			break wait
		case <-tick.C:
		}
	}
	s.closeConns(err == nil)
	s.stop()
	return err
}

// Close closes every listener and connection at once, without waiting for
// running handlers (their contexts are cancelled).
func (s *Server) Close() error {
	s.mu.Lock()
	s.stopping = true
	s.shutdown.Store(true)
	for l := range s.listeners {
		l.Close()
	}
	s.mu.Unlock()
	s.closeConns(false)
	s.stop()
	return nil
}

// allAcked reports whether every connection answered the go-away (so no
// request can still be on its way) or has closed.
func allAcked(conns []*conn) bool {
	for _, c := range conns {
		select {
		case <-c.acked:
		case <-c.ctx.Done():
		default:
			return false
		}
	}
	return true
}

func (s *Server) stop() {
	s.stopOnce.Do(func() {
		close(s.stopped)
		go s.stopIdle()
	})
}

func (s *Server) closeConns(flush bool) {
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.close(flush)
		}()
	}
	wg.Wait()
}

// errShuttingDown answers requests that arrive during Shutdown.
var errShuttingDown = fleet.NewError(fleet.ShuttingDown, "server is shutting down")

// errClosed is the writer error after a connection closed.
var errClosed = fleet.NewError(fleet.Unavailable, "connection closed")
