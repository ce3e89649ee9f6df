package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/server"
	"google.golang.org/grpc"
)

// ErrClosed is returned by Serve after Shutdown or Close.
var ErrClosed = errors.New("gateway: closed")

// Option configures a Gateway; see New.
type Option interface{ apply(*options) }

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

type options struct {
	sniffTimeout   time.Duration
	maxBatch       int
	batchConc      int
	maxDepth       int
	maxDecodeCost  int64
	protoPackage   string
	headerTimeout  time.Duration
	idleTimeout    time.Duration
	maxHeaderBytes int
	tls            *tls.Config
	h2cHTTP        bool
	logger         *slog.Logger
	limits         httpLimits
	closedLiveness bool
	cors           *CORS
}

func defaultOptions() options {
	return options{
		sniffTimeout:   2 * time.Minute,
		maxBatch:       1000,
		batchConc:      8,
		maxDepth:       100,
		headerTimeout:  10 * time.Second,
		idleTimeout:    2 * time.Minute,
		maxHeaderBytes: 64 << 10,
		logger:         slog.Default(),
		limits:         defaultHTTPLimits(),
	}
}

// WithSniffTimeout bounds the wait for the first six bytes of a
// connection, which decide its protocol; a connection that sends nothing
// for d is closed. Native clients may dial long before their first call,
// so the default is the Fleet server's default idle timeout, 2 minutes.
func WithSniffTimeout(d time.Duration) Option {
	return optionFunc(func(o *options) { o.sniffTimeout = d })
}

// WithMaxBatch caps the entries of one JSON-RPC 2.0 batch; a larger batch
// is refused whole with an Invalid Request error before its entries are
// decoded. Default 1000.
func WithMaxBatch(n int) Option { return optionFunc(func(o *options) { o.maxBatch = max(n, 1) }) }

// WithBatchConcurrency sets how many entries of one JSON-RPC 2.0 batch run
// at once; the responses keep the batch's order either way. 1 runs them
// one after another. Default 8.
func WithBatchConcurrency(n int) Option {
	return optionFunc(func(o *options) { o.batchConc = max(n, 1) })
}

// WithMaxJSONDepth caps the nesting of arrays and objects in a JSON body
// (HTTP/JSON and JSON-RPC 2.0), checked by a scan before anything is
// decoded. Default 100.
func WithMaxJSONDepth(n int) Option { return optionFunc(func(o *options) { o.maxDepth = max(n, 2) }) }

// WithMaxDecodeCost bounds the bytes that decoding one gRPC request of a
// method taking Go types may allocate for its Go argument, counted as
// they are allocated (see docs/gateway.md, "Go types over gRPC"): past n
// the call stops with ResourceExhausted. Protobuf methods are not
// concerned (their generated messages are decoded by protobuf-go).
// Default (n <= 0): 8 times the server's Limits.MaxDecompressedSize,
// 32 MiB with its default.
func WithMaxDecodeCost(n int64) Option {
	return optionFunc(func(o *options) { o.maxDecodeCost = n })
}

// WithProtoPackage sets the protobuf package that gRPC clients put before
// Fleet service names: with "fleet.demo", the Fleet service Hello is the
// gRPC service fleet.demo.Hello (path /fleet.demo.Hello/Say). Calls that
// use the bare Fleet name (/Hello/Say) are served either way. Default ""
// (gRPC names are the Fleet names).
func WithProtoPackage(pkg string) Option {
	return optionFunc(func(o *options) { o.protoPackage = pkg })
}

// WithTLS makes Serve accept TLS beside cleartext on the same listener: a
// connection that opens with a TLS handshake record is handshaken with cfg
// (within the sniff timeout), offering ALPN "h2" and "http/1.1" unless
// cfg.NextProtos is set. A client that negotiated h2 or http/1.1 is served
// HTTP (gRPC over TLS needs h2); otherwise the decrypted bytes are sniffed
// like a cleartext connection's, so native Fleet clients dialling with TLS
// are served too. Default: no TLS (a TLS handshake closes the connection).
func WithTLS(cfg *tls.Config) Option {
	return optionFunc(func(o *options) {
		c := cfg.Clone()
		if len(c.NextProtos) == 0 {
			c.NextProtos = []string{"h2", "http/1.1"}
		}
		o.tls = c
	})
}

// WithH2CToHTTP serves every cleartext HTTP/2 connection (h2c with prior
// knowledge) with the net/http server, like HTTP/1.1 and TLS connections:
// gRPC over h2c then goes through grpc.Server.ServeHTTP, which is about
// half as fast. Default false: an h2c connection goes by its first
// request (h2csniff.go), to grpc-go's own HTTP/2 transport when it is gRPC
// with protobuf, to net/http otherwise (Connect, gRPC-Web, HTTP/JSON,
// JSON-RPC); later requests on it go to the same server, so a connection
// that began with gRPC answers other protocols with grpc-go's 415.
func WithH2CToHTTP(on bool) Option { return optionFunc(func(o *options) { o.h2cHTTP = on }) }

// WithLogger sets the logger for connection-level events (failed
// handshakes, sniffing errors). Nothing is logged per call. Default
// slog.Default().
func WithLogger(l *slog.Logger) Option { return optionFunc(func(o *options) { o.logger = l }) }

// Gateway serves a Fleet server's services over gRPC, HTTP/JSON and
// JSON-RPC 2.0 beside its native protocol. Its methods are safe for
// concurrent use.
type Gateway struct {
	srv     *server.Server
	opts    options
	grpc    *grpc.Server
	handler http.Handler
	http    *http.Server
	httpLis *chanListener
	grpcLis *chanListener
	authOn  bool // the server has an auth function
	connect *connectRoute
	cors    *corsPolicy // nil without WithCORS
	// codecs caches binaryCodecFor's findings by typePair; codecForFn
	// is binaryCodecFor, made once (a method value per call would
	// allocate).
	codecs     sync.Map
	codecForFn func(server.MethodDesc) (codec.Codec, error)

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	sniffing  map[net.Conn]struct{}
	closed    bool
	serveOnce sync.Once      // starts the HTTP and gRPC servers
	serving   sync.WaitGroup // their Serve calls
	wg        sync.WaitGroup // connections being sniffed
}

// New returns a Gateway for srv. It registers a function with
// srv.OnShutdown, so srv.Shutdown also stops the gateway's listeners and
// drains its HTTP and gRPC calls before the Fleet server stops.
func New(srv *server.Server, opts ...Option) *Gateway {
	g := &Gateway{
		srv:       srv,
		opts:      defaultOptions(),
		listeners: map[net.Listener]struct{}{},
		sniffing:  map[net.Conn]struct{}{},
	}
	for _, o := range opts {
		o.apply(&g.opts)
	}
	g.authOn, _ = srv.Authenticate(context.Background(), "", "", nil)
	g.codecForFn = g.binaryCodecFor
	g.grpc = g.newGRPC()
	g.connect = newConnectRoute(g)
	g.registerIntrospection()
	g.cors = newCORSPolicy(g.opts.cors)
	g.handler = http.HandlerFunc(g.routeHTTP)
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetHTTP2(true)
	protos.SetUnencryptedHTTP2(true)
	g.httpLis = newChanListener()
	g.grpcLis = newChanListener()
	g.http = &http.Server{
		Handler:           g.handler,
		Protocols:         &protos,
		ReadHeaderTimeout: g.opts.headerTimeout,
		IdleTimeout:       g.opts.idleTimeout,
		MaxHeaderBytes:    g.opts.maxHeaderBytes,
		HTTP2:             g.http2Config(),
		ErrorLog:          slog.NewLogLogger(g.opts.logger.Handler(), slog.LevelDebug),
	}
	srv.OnShutdown(func(ctx context.Context) { _ = g.stop(ctx) })
	return g
}

// Handler returns the HTTP side as an http.Handler: Connect and gRPC-Web
// for requests of their content types (isConnectRequest; Connect unary
// JSON is told from HTTP/JSON by its Connect-Protocol-Version header),
// gRPC for requests whose Content-Type begins with application/grpc
// (HTTP/2 only), JSON-RPC 2.0 for POST / and POST /jsonrpc, HTTP/JSON for
// POST /{service}/{method}; CORS preflights with WithCORS. It is safe for
// concurrent use.
func (g *Gateway) Handler() http.Handler { return g.handler }

// routeHTTP sends an HTTP request to its protocol's side.
func (g *Gateway) routeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case isConnectRequest(r):
		g.connect.serve(w, r)
	case g.cors != nil && isPreflight(r):
		g.cors.preflight(w, r)
	default:
		g.serveHTTP(w, r)
	}
}

// Serve accepts connections on lis and serves each by its first bytes (see
// the package doc) until Shutdown or Close, then returns ErrClosed; other
// accept errors are returned as they are. It closes lis when it returns.
func (g *Gateway) Serve(lis net.Listener) error {
	g.mu.Lock()
	if g.closed || g.srv.ShuttingDown() {
		g.mu.Unlock()
		lis.Close()
		return ErrClosed
	}
	g.listeners[lis] = struct{}{}
	g.mu.Unlock()
	g.serveOnce.Do(func() {
		g.serving.Add(2)
		go func() {
			defer g.serving.Done()
			_ = g.http.Serve(g.httpLis)
		}()
		go func() {
			defer g.serving.Done()
			_ = g.grpc.Serve(g.grpcLis)
		}()
	})
	defer func() {
		g.mu.Lock()
		delete(g.listeners, lis)
		g.mu.Unlock()
		lis.Close()
	}()
	var backoff time.Duration
	for {
		nc, err := lis.Accept()
		if err != nil {
			g.mu.Lock()
			closed := g.closed
			g.mu.Unlock()
			if closed {
				return ErrClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) {
				backoff = min(max(backoff*2, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		g.mu.Lock()
		if g.closed {
			g.mu.Unlock()
			nc.Close()
			return ErrClosed
		}
		g.sniffing[nc] = struct{}{}
		g.wg.Add(1)
		g.mu.Unlock()
		go g.route(nc)
	}
}

// route sniffs nc (through TLS when it opens with a handshake) and hands
// it to the native server or the HTTP server. The gateway's WaitGroup
// covers the sniffing only: once handed over, a connection belongs to the
// server that serves it.
func (g *Gateway) route(nc net.Conn) {
	kind, conn := g.classifyConn(nc)
	g.mu.Lock()
	delete(g.sniffing, nc)
	closed := g.closed
	g.mu.Unlock()
	g.wg.Done()
	if closed || kind == kindUnknown {
		nc.Close()
		return
	}
	switch kind {
	case kindNative:
		// Served on this goroutine, as Server.Serve would.
		g.srv.ServeConn(conn)
	case kindHTTP:
		if !g.httpLis.deliver(conn) {
			conn.Close()
		}
	case kindH2C:
		l := g.opts.limits
		conn = newH2Guard(conn, l.maxResets, l.frameTimeout, g.opts.maxHeaderBytes)
		if !g.grpcLis.deliver(conn) {
			conn.Close()
		}
	}
}

// classifyConn returns nc's protocol (kindNative or kindHTTP) and the
// connection to serve it on; kindUnknown when nc is to be closed.
func (g *Gateway) classifyConn(nc net.Conn) (connKind, net.Conn) {
	kind, pc, err := sniff(nc, g.opts.sniffTimeout)
	if err != nil {
		g.opts.logger.Debug("fleet gateway: closing connection", "remote", nc.RemoteAddr(), "err", err)
		return kindUnknown, nil
	}
	switch kind {
	case kindHTTP:
		if string(pc.(*prefixConn).buf[:4]) == "PRI " {
			if !g.opts.h2cHTTP {
				// By the first request (h2csniff.go).
				toHTTP, rc, err := g.sniffH2C(pc)
				if err != nil {
					g.opts.logger.Debug("fleet gateway: closing HTTP/2 connection", "remote", nc.RemoteAddr(), "err", err)
					return kindUnknown, nil
				}
				if !toHTTP {
					return kindH2C, rc
				}
				l := g.opts.limits
				return kind, newH2Guard(rc, l.maxResets, l.frameTimeout, g.opts.maxHeaderBytes)
			}
			// h2c for net/http: watched for resets and stalls too.
			l := g.opts.limits
			return kind, newH2Guard(pc, l.maxResets, l.frameTimeout, g.opts.maxHeaderBytes)
		}
		return kind, pc
	case kindNative:
		return kind, pc
	case kindTLS:
		if g.opts.tls == nil {
			g.opts.logger.Debug("fleet gateway: TLS handshake without WithTLS", "remote", nc.RemoteAddr())
			return kindUnknown, nil
		}
		return g.classifyTLS(pc)
	}
	g.opts.logger.Debug("fleet gateway: unknown protocol", "remote", nc.RemoteAddr())
	return kindUnknown, nil
}

// Shutdown stops the gateway and its Fleet server gracefully: it calls the
// server's Shutdown, which (through the function New registered with
// OnShutdown) first closes the gateway's listeners and waits for HTTP and
// gRPC calls to finish, then drains native connections. It returns ctx's
// error when ctx ends first.
func (g *Gateway) Shutdown(ctx context.Context) error { return g.srv.Shutdown(ctx) }

// Close closes the gateway's listeners and connections and the Fleet
// server at once, without waiting for running calls.
func (g *Gateway) Close() error {
	g.closeListeners()
	_ = g.http.Close()
	g.grpc.Stop()
	g.httpLis.Close()
	g.grpcLis.Close()
	err := g.srv.Close()
	g.wg.Wait()
	g.waitServers()
	return err
}

// stop is the OnShutdown function: no new connections, HTTP and gRPC calls
// drained (bounded by ctx).
func (g *Gateway) stop(ctx context.Context) error {
	g.closeListeners()
	g.httpLis.Close()
	g.grpcLis.Close()
	grpcDone := make(chan struct{})
	go func() {
		defer close(grpcDone)
		g.grpc.GracefulStop()
	}()
	err := g.http.Shutdown(ctx)
	if err != nil {
		_ = g.http.Close()
	}
	select {
	case <-grpcDone:
	case <-ctx.Done():
		g.grpc.Stop()
		<-grpcDone
		err = ctx.Err()
	}
	g.wg.Wait()
	g.waitServers()
	return err
}

// waitServers waits for the embedded HTTP and gRPC servers' Serve calls
// to return (at once when they never started).
func (g *Gateway) waitServers() {
	g.serveOnce.Do(func() {})
	g.serving.Wait()
}

func (g *Gateway) closeListeners() {
	g.mu.Lock()
	g.closed = true
	for l := range g.listeners {
		l.Close()
	}
	for c := range g.sniffing {
		c.Close()
	}
	g.mu.Unlock()
}

// classifyTLS handshakes a TLS connection and routes it by ALPN when the
// client chose h2 or http/1.1, else by its first decrypted bytes.
func (g *Gateway) classifyTLS(pc net.Conn) (connKind, net.Conn) {
	tc := tls.Server(pc, g.opts.tls)
	ctx, cancel := context.WithCancel(context.Background())
	if g.opts.sniffTimeout > 0 {
		ctx, cancel = context.WithTimeout(context.Background(), g.opts.sniffTimeout)
	}
	err := tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		g.opts.logger.Debug("fleet gateway: TLS handshake", "remote", pc.RemoteAddr(), "err", err)
		return kindUnknown, nil
	}
	switch tc.ConnectionState().NegotiatedProtocol {
	case "h2":
		// The decrypted stream, watched for resets and stalls like
		// cleartext HTTP/2: net/http serves it as h2c with prior
		// knowledge (the client's first bytes are the HTTP/2 preface),
		// so requests on it have no Request.TLS.
		l := g.opts.limits
		return kindHTTP, newH2Guard(tc, l.maxResets, l.frameTimeout, g.opts.maxHeaderBytes)
	case "http/1.1":
		// A *tls.Conn: net/http serves it as HTTPS.
		return kindHTTP, tc
	}
	kind, inner, err := sniff(tc, g.opts.sniffTimeout)
	if err != nil || (kind != kindNative && kind != kindHTTP) {
		return kindUnknown, nil
	}
	return kind, inner
}
