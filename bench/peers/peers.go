package peers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetrpc/fleet/internal/benchpb"
)

// ErrUnsupported is returned by a Client operation the peer does not offer.
var ErrUnsupported = errors.New("peers: operation not supported by this peer")

// Op names one benchmark operation.
type Op string

// The operations of the benchmark scenarios.
const (
	OpEcho      Op = "echo"
	OpAdd       Op = "add"
	OpLog       Op = "log"
	OpLogOneway Op = "log-oneway"
)

// ServerOptions configures a peer's server.
type ServerOptions struct {
	// Sleep is how long the Echo handler sleeps before answering
	// (scenario 3, the handler-latency study). Zero means no sleep.
	Sleep time.Duration
}

// Server is the serving side of a peer.
type Server interface {
	// Serve accepts connections on lis until Close; it returns nil after
	// Close.
	Serve(lis net.Listener) error
	// Close stops the server and closes its connections.
	Close() error
	// Received is the number of log entries the server has received so
	// far, by Log and LogOneway together.
	Received() int64
}

// ClientOptions configures a peer's client.
type ClientOptions struct {
	// Conns is the number of connections (gRPC ClientConns, Thrift pooled
	// clients, net/rpc clients); calls are spread over them round robin.
	// Zero means 1.
	Conns int
	// Compress asks for zstd compression of large payloads, where the
	// peer supports it (Fleet); other peers ignore it.
	Compress bool
}

// Client is the calling side of a peer. Its methods are safe for
// concurrent use.
type Client interface {
	// Echo sends the benchmark message and checks the reply.
	Echo(ctx context.Context) error
	// Add returns a + b as computed by the server.
	Add(ctx context.Context, a, b int32) (int32, error)
	// Log ships one batch of LogBatchSize entries and waits for the
	// server's result code.
	Log(ctx context.Context) error
	// LogOneway ships one batch without waiting for an answer.
	LogOneway(ctx context.Context) error
	// Close closes the client's connections.
	Close() error
}

// Peer describes one RPC stack.
type Peer struct {
	// Name is the short identifier used on the command line ("grpc").
	Name string
	// Title is how tables show it ("gRPC-go").
	Title string
	// Desc says how the peer is used, for the report.
	Desc string
	// Ops lists the operations the peer offers.
	Ops []Op
	// OnewayDesc says what LogOneway is for this peer, for the report.
	OnewayDesc string
	// NewServer builds a server.
	NewServer func(ServerOptions) (Server, error)
	// Dial connects a client to a server at addr (host:port on TCP).
	Dial func(ctx context.Context, addr string, opts ClientOptions) (Client, error)
	// Variant marks another set-up of a peer listed above it (Fleet with
	// typed or value-receiver registration): measured only when named
	// (--peers), never in the default set.
	Variant bool
}

// Has reports whether p offers op.
func (p *Peer) Has(op Op) bool { return slices.Contains(p.Ops, op) }

var (
	regMu    sync.Mutex
	registry []*Peer
)

// Register adds a peer; it is meant for init functions.
func Register(p *Peer) {
	regMu.Lock()
	defer regMu.Unlock()
	for _, q := range registry {
		if q.Name == p.Name {
			panic("peers: duplicate peer " + p.Name)
		}
	}
	registry = append(registry, p)
}

// Order is the order in which peers appear in reports: Fleet first, the raw
// ceilings last.
var Order = []string{Fleet, FleetTyped, FleetValue, FleetVT, FleetObserved, FleetObservedAll, FleetGencode, RPCX, ARPC, Kitex, KitexMux, GRPC, Thrift, NetRPC, JSONRPC, Raw, GobStream}

// All returns the registered peers in Order.
func All() []*Peer {
	regMu.Lock()
	defer regMu.Unlock()
	out := slices.Clone(registry)
	idx := func(name string) int {
		if i := slices.Index(Order, name); i >= 0 {
			return i
		}
		return len(Order)
	}
	slices.SortStableFunc(out, func(a, b *Peer) int { return idx(a.Name) - idx(b.Name) })
	return out
}

// Get returns the peer with the given name, or nil.
func Get(name string) *Peer {
	for _, p := range All() {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// Names returns the names of the registered peers, in Order.
func Names() []string {
	var names []string
	for _, p := range All() {
		names = append(names, p.Name)
	}
	return names
}

// Default returns the peers measured when none are named: All without the
// variants.
func Default() []*Peer {
	var out []*Peer
	for _, p := range All() {
		if !p.Variant {
			out = append(out, p)
		}
	}
	return out
}

// The peer names.
const (
	Fleet = "fleet"
	// FleetTyped is Fleet with Hello.Say registered by server.Handle.
	FleetTyped = "fleet-typed"
	// FleetValue is Fleet with Hello.Say on a value receiver.
	FleetValue = "fleet-value"
	// FleetVT is Fleet with the echo message's vtprotobuf methods.
	FleetVT = "fleet-vt"
	// FleetGencode is Fleet echoing the gencode-generated message with
	// codec.Gencode.
	FleetGencode = "fleet-gencode"
	GRPC         = "grpc"
	RPCX         = "rpcx"
	ARPC         = "arpc"
	// Kitex is Kitex with its long-connection pool, KitexMux with its
	// multiplexed connection.
	Kitex     = "kitex"
	KitexMux  = "kitex-mux"
	Thrift    = "thrift"
	NetRPC    = "netrpc"
	JSONRPC   = "jsonrpc"
	Raw       = "raw"
	GobStream = "gobstream"
)

// LogBatchSize is the number of entries in one shipped batch (seed 004).
const LogBatchSize = 200

// LogHostname is the hostname carried by every log entry.
const LogHostname = "web-042.fleet.example"

// LogLine is the 400-byte nginx access-log line of every log entry (seed 004
// ships "a 400-byte standard nginx log line").
var LogLine = func() string {
	const line = `203.0.113.57 - - [12/Mar/2024:14:07:31 +0800] "GET /api/v2/catalog/items?category=books&page=17&sort=price_asc&limit=50 HTTP/1.1" 200 18734 "https://shop.example.com/catalog/books?page=16&sort=price_asc" "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/122.0.0.0 Safari/537.36" rt=0.042 uct=0.001 uht=0.040 urt=0.041 upstream=10.0.3.17:8080 req_id=`
	if len(line) > 400 {
		panic(fmt.Sprintf("peers: log line is %d bytes", len(line)))
	}
	return line + strings.Repeat("7c3e9a1f0b5d2468", 4)[:400-len(line)]
}()

// LogEntryBytes is the payload size of one entry: hostname plus message.
const LogEntryBytes = len(LogHostname) + 400

// Echo reply values set by every server's handler.
const (
	EchoField1 = "OK"
	EchoField2 = 100
)

// checkEcho validates an echo reply's fields; the values are those of
// benchpb.New except field1 and field2, which the handler sets.
func checkEcho(field1 string, field2, field3 int32, field9 string) error {
	if field1 != EchoField1 || field2 != EchoField2 || field3 != benchpb.Number || field9 != benchpb.Text {
		return fmt.Errorf("peers: bad echo reply: field1=%q field2=%d field3=%d", field1, field2, field3)
	}
	return nil
}

func checkAdd(a, b, x int32) error {
	if x != a+b {
		return fmt.Errorf("peers: Add(%d, %d) = %d", a, b, x)
	}
	return nil
}

func checkLogCount(n int) error {
	if n != LogBatchSize {
		return fmt.Errorf("peers: server acknowledged %d entries, want %d", n, LogBatchSize)
	}
	return nil
}

// sleep waits d, or returns early when ctx is done.
func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// connTracker remembers a server's open connections so that Close can
// close them.
type connTracker struct {
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// add records c; it returns false (and closes c) after close.
func (t *connTracker) add(c net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		c.Close()
		return false
	}
	if t.conns == nil {
		t.conns = make(map[net.Conn]struct{})
	}
	t.conns[c] = struct{}{}
	return true
}

func (t *connTracker) remove(c net.Conn) {
	t.mu.Lock()
	delete(t.conns, c)
	t.mu.Unlock()
}

func (t *connTracker) closeAll() {
	t.mu.Lock()
	t.closed = true
	conns := t.conns
	t.conns = nil
	t.mu.Unlock()
	for c := range conns {
		c.Close()
	}
}

// counter counts received log entries.
type counter struct{ n atomic.Int64 }

func (c *counter) Received() int64 { return c.n.Load() }

// roundRobin picks an index in [0, n) in turn.
type roundRobin struct{ next atomic.Uint32 }

func (r *roundRobin) pick(n int) int {
	if n == 1 {
		return 0
	}
	return int(r.next.Add(1) % uint32(n))
}

func conns(o ClientOptions) int {
	if o.Conns < 1 {
		return 1
	}
	return o.Conns
}

// serveLoop accepts on lis and runs handle for each connection in its own
// goroutine until lis is closed.
func serveLoop(lis net.Listener, t *connTracker, handle func(net.Conn)) error {
	for {
		c, err := lis.Accept()
		if err != nil {
			t.mu.Lock()
			closed := t.closed
			t.mu.Unlock()
			if closed || errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			return err
		}
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetNoDelay(true)
		}
		if !t.add(c) {
			continue
		}
		go func() {
			defer t.remove(c)
			defer c.Close()
			handle(c)
		}()
	}
}

// tcpServer is the part every hand-written TCP peer server shares: its
// listener and open connections, closed together by Close.
type tcpServer struct {
	conns connTracker
	lis   listenerCloser
}

// serve accepts on lis and runs handle for each connection (serveLoop).
func (s *tcpServer) serve(lis net.Listener, handle func(net.Conn)) error {
	s.lis.set(lis)
	return serveLoop(lis, &s.conns, handle)
}

// Close closes the listener, then every open connection.
func (s *tcpServer) Close() error {
	s.lis.close()
	s.conns.closeAll()
	return nil
}

// listenerCloser closes the listener once.
type listenerCloser struct {
	once sync.Once
	mu   sync.Mutex
	lis  net.Listener
}

func (l *listenerCloser) set(lis net.Listener) {
	l.mu.Lock()
	l.lis = lis
	l.mu.Unlock()
}

func (l *listenerCloser) close() {
	l.once.Do(func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.lis != nil {
			l.lis.Close()
		}
	})
}
