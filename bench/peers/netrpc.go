package peers

import (
	"context"
	"net"
	"net/rpc"
	"net/rpc/jsonrpc"
	"time"

	"github.com/fleetrpc/fleet/internal/benchpb"
)

// The net/rpc peers: Go's net/rpc with its default gob codec, and with
// net/rpc/jsonrpc. Arguments are ordinary Go structs (benchpb.Plain for the
// echo), as net/rpc users write them. An rpc.Client multiplexes concurrent
// calls on its connection; N connections = N clients used round robin.

func init() {
	Register(&Peer{
		Name:      NetRPC,
		Title:     "net/rpc (gob)",
		Desc:      "Go's net/rpc with its gob codec, plain Go structs; N connections = N rpc.Clients used round robin",
		Ops:       []Op{OpEcho, OpAdd, OpLog},
		NewServer: func(o ServerOptions) (Server, error) { return newNetRPCServer(o, false) },
		Dial: func(ctx context.Context, addr string, o ClientOptions) (Client, error) {
			return dialNetRPC(ctx, addr, o, false)
		},
	})
	Register(&Peer{
		Name:      JSONRPC,
		Title:     "net/rpc/jsonrpc",
		Desc:      "Go's net/rpc with the net/rpc/jsonrpc codec (JSON-RPC 1.0), plain Go structs; N connections = N clients used round robin",
		Ops:       []Op{OpEcho, OpAdd, OpLog},
		NewServer: func(o ServerOptions) (Server, error) { return newNetRPCServer(o, true) },
		Dial: func(ctx context.Context, addr string, o ClientOptions) (Client, error) {
			return dialNetRPC(ctx, addr, o, true)
		},
	})
}

// AddArgs and AddReply are MathService.Add's arguments and result for the
// net/rpc peers.
type AddArgs struct{ A, B int32 }

// AddReply is the result of MathService.Add.
type AddReply struct{ X int32 }

// GobLogEntry is one log entry as Go structs carry it (seed 004's gob type).
type GobLogEntry struct {
	Hostname string
	Message  string
}

// LogBatch is a batch of log entries for the net/rpc peers.
type LogBatch struct{ Entries []GobLogEntry }

// LogReply is the server's answer to a batch: a result code (0 = OK) and
// the number of entries received.
type LogReply struct {
	Code  int
	Count int
}

// NetHello is the net/rpc echo service.
type NetHello struct{ sleep time.Duration }

// Say answers the benchmark message with field1 = "OK" and field2 = 100.
func (h *NetHello) Say(args *benchpb.Plain, reply *benchpb.Plain) error {
	if h.sleep > 0 {
		time.Sleep(h.sleep)
	}
	*reply = *args
	reply.Field1, reply.Field2 = EchoField1, EchoField2
	return nil
}

// NetMath is the net/rpc MathService.
type NetMath struct{}

// Add sets reply.X = A + B.
func (NetMath) Add(args *AddArgs, reply *AddReply) error {
	reply.X = args.A + args.B
	return nil
}

// NetLog is the net/rpc log service.
type NetLog struct{ c *counter }

// Log counts the entries of a batch.
func (l *NetLog) Log(args *LogBatch, reply *LogReply) error {
	l.c.n.Add(int64(len(args.Entries)))
	reply.Code, reply.Count = 0, len(args.Entries)
	return nil
}

type netRPCServer struct {
	counter
	json bool
	srv  *rpc.Server
	tcpServer
}

func newNetRPCServer(o ServerOptions, json bool) (Server, error) {
	s := &netRPCServer{json: json, srv: rpc.NewServer()}
	if err := s.srv.RegisterName("Hello", &NetHello{sleep: o.Sleep}); err != nil {
		return nil, err
	}
	if err := s.srv.RegisterName("MathService", NetMath{}); err != nil {
		return nil, err
	}
	if err := s.srv.RegisterName("LogService", &NetLog{c: &s.counter}); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *netRPCServer) Serve(lis net.Listener) error {
	return s.serve(lis, func(c net.Conn) {
		if s.json {
			s.srv.ServeCodec(jsonrpc.NewServerCodec(c))
		} else {
			s.srv.ServeConn(c)
		}
	})
}

type netRPCClient struct {
	rr      roundRobin
	clients []*rpc.Client
	msg     *benchpb.Plain
	batch   *LogBatch
}

func dialNetRPC(ctx context.Context, addr string, o ClientOptions, json bool) (Client, error) {
	c := &netRPCClient{msg: benchpb.NewPlain(), batch: newGobBatch()}
	var d net.Dialer
	for range conns(o) {
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			c.Close()
			return nil, err
		}
		if json {
			c.clients = append(c.clients, jsonrpc.NewClient(conn))
		} else {
			c.clients = append(c.clients, rpc.NewClient(conn))
		}
	}
	return c, nil
}

// call is rpc.Client.Call with a context: the wait ends when ctx is done.
func (c *netRPCClient) call(ctx context.Context, method string, args, reply any) error {
	cl := c.clients[c.rr.pick(len(c.clients))]
	call := cl.Go(method, args, reply, make(chan *rpc.Call, 1))
	select {
	case <-call.Done:
		return call.Error
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *netRPCClient) Echo(ctx context.Context) error {
	var out benchpb.Plain
	if err := c.call(ctx, "Hello.Say", c.msg, &out); err != nil {
		return err
	}
	return checkEcho(out.Field1, out.Field2, out.Field3, out.Field9)
}

func (c *netRPCClient) Add(ctx context.Context, a, b int32) (int32, error) {
	var out AddReply
	if err := c.call(ctx, "MathService.Add", &AddArgs{A: a, B: b}, &out); err != nil {
		return 0, err
	}
	return out.X, checkAdd(a, b, out.X)
}

func (c *netRPCClient) Log(ctx context.Context) error {
	var out LogReply
	if err := c.call(ctx, "LogService.Log", c.batch, &out); err != nil {
		return err
	}
	return checkLogCount(out.Count)
}

func (c *netRPCClient) LogOneway(context.Context) error { return ErrUnsupported }

func (c *netRPCClient) Close() error {
	for _, cl := range c.clients {
		cl.Close()
	}
	return nil
}

func newGobBatch() *LogBatch {
	b := &LogBatch{Entries: make([]GobLogEntry, LogBatchSize)}
	for i := range b.Entries {
		b.Entries[i] = GobLogEntry{Hostname: LogHostname, Message: LogLine}
	}
	return b
}
