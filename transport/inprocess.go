package transport

import (
	"context"
	"net"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/internal/memconn"
)

// InProcess is the network name of the in-process transport, registered by
// this package: a server listening on it with
// server.Server.Listen("inprocess", name) is dialled with
// client.Dial(ctx, "inprocess", name), or by an XClient whose registry
// entry says "inprocess@name", from the same process only. A connection is
// an in-memory, buffered, full-duplex pipe (256 KiB each way) whose
// addresses say "inprocess"; the listener's address is its name.
//
// Names are those of listeners open in the process: Listen fails with
// AlreadyExists for a name in use, and an empty name picks a new one
// ("inprocess-1", "inprocess-2", ...; read it from the listener's Addr).
// Dial fails with Unavailable when no listener has the name, as dialling a
// port nobody listens on does, and waits (bounded by its ctx) until the
// listener accepts. client.InProcess joins a client to a server without
// a name.
const InProcess = memconn.Network

func init() { Register(InProcess, inProcess{}) }

// inProcess is the Transport registered under InProcess.
type inProcess struct{}

var inproc struct {
	mu        sync.Mutex
	listeners map[string]*memListener
	next      atomic.Uint64
}

// Listen opens the listener named addr (a new name when addr is empty).
func (inProcess) Listen(ctx context.Context, addr string) (net.Listener, error) {
	inproc.mu.Lock()
	defer inproc.mu.Unlock()
	if addr == "" {
		for addr == "" || inproc.listeners[addr] != nil {
			addr = InProcess + "-" + strconv.FormatUint(inproc.next.Add(1), 10)
		}
	}
	if inproc.listeners[addr] != nil {
		return nil, fleet.Errorf(fleet.AlreadyExists, "listen %s %q: the name is in use", InProcess, addr)
	}
	if inproc.listeners == nil {
		inproc.listeners = map[string]*memListener{}
	}
	l := &memListener{name: addr, conns: make(chan net.Conn), done: make(chan struct{})}
	inproc.listeners[addr] = l
	return l, nil
}

// Dial connects to the listener named addr and waits until it accepts.
func (inProcess) Dial(ctx context.Context, addr string) (net.Conn, error) {
	inproc.mu.Lock()
	l := inproc.listeners[addr]
	inproc.mu.Unlock()
	if l == nil {
		return nil, fleet.Errorf(fleet.Unavailable, "dial %s %q: no listener has that name", InProcess, addr)
	}
	cc, sc := memconn.Pipe(0)
	select {
	case l.conns <- sc:
		return cc, nil
	case <-l.done:
		return nil, fleet.Errorf(fleet.Unavailable, "dial %s %q: the listener is closed", InProcess, addr)
	case <-ctx.Done():
		return nil, fleet.Errorf(fleet.CodeOf(fleet.FromContextError(ctx.Err())), "dial %s %q: %v", InProcess, addr, ctx.Err())
	}
}

// memListener is an in-process listener: Dial hands it the server's end
// of a new pipe, Accept takes it.
type memListener struct {
	name  string
	conns chan net.Conn // unbuffered: Dial returns once Accept took its conn
	done  chan struct{}
	once  sync.Once
}

// Accept waits for the next Dial; after Close it fails with net.ErrClosed.
func (l *memListener) Accept() (net.Conn, error) {
	select {
	case nc := <-l.conns:
		return nc, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close frees the name and ends Accept; connections already accepted go
// on. It returns nil, also when called again.
func (l *memListener) Close() error {
	l.once.Do(func() {
		inproc.mu.Lock()
		if inproc.listeners[l.name] == l {
			delete(inproc.listeners, l.name)
		}
		inproc.mu.Unlock()
		close(l.done)
	})
	return nil
}

// Addr returns the listener's name, network "inprocess".
func (l *memListener) Addr() net.Addr { return nameAddr(l.name) }

// nameAddr is an in-process listener's address: its name.
type nameAddr string

func (nameAddr) Network() string  { return InProcess }
func (a nameAddr) String() string { return string(a) }
