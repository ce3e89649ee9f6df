package peers

import (
	"context"
	"errors"
	"net"
	"strings"
	"time"

	rpcxclient "github.com/smallnest/rpcx/client"
	rpcxproto "github.com/smallnest/rpcx/protocol"
	rpcxserver "github.com/smallnest/rpcx/server"

	"github.com/fleetrpc/fleet/bench/benchmsg"
	"github.com/fleetrpc/fleet/internal/benchpb"
)

// The rpcx peer: github.com/smallnest/rpcx, used as rpcx's own benchmark
// uses it: protobuf serialization, the "Hello.Say" service, one
// rpcx client.Client per connection (calls spread round robin over
// ClientOptions.Conns clients). LogOneway is not measured: rpcx's oneway
// requests go through its XClient and service discovery, not the plain
// client the other scenarios use.

func init() {
	Register(&Peer{
		Name:      RPCX,
		Title:     "rpcx",
		Desc:      "github.com/smallnest/rpcx v1.9.1, protobuf serialization, one client.Client per connection used round robin",
		Ops:       []Op{OpEcho, OpAdd, OpLog},
		NewServer: newRPCXServer,
		Dial:      dialRPCX,
	})
}

// RPCXHello is the rpcx echo service; its handler is the one every peer
// uses (benchpb.Echo).
type RPCXHello struct{ h *rpcxHandler }

// Say answers the benchmark message with field1 = "OK" and field2 = 100.
func (s *RPCXHello) Say(ctx context.Context, args *benchpb.BenchmarkMessage, reply *benchpb.BenchmarkMessage) error {
	sleep(ctx, s.h.sleep)
	benchpb.Echo(reply, args)
	return nil
}

// RPCXMath is the rpcx MathService.
type RPCXMath struct{}

// Add sets reply.X = A + B.
func (RPCXMath) Add(_ context.Context, args *benchmsg.AddRequest, reply *benchmsg.AddReply) error {
	reply.X = args.A + args.B
	return nil
}

// RPCXLog is the rpcx LogService.
type RPCXLog struct{ h *rpcxHandler }

// Log counts the batch's entries and acknowledges them.
func (l *RPCXLog) Log(_ context.Context, args *benchmsg.LogBatch, reply *benchmsg.LogReply) error {
	l.h.n.Add(int64(len(args.Entries)))
	reply.Code = benchmsg.ResultCode_OK
	reply.Count = int32(len(args.Entries))
	return nil
}

type rpcxHandler struct {
	counter
	sleep time.Duration
}

type rpcxServer struct {
	counter *counter
	srv     *rpcxserver.Server
}

func newRPCXServer(o ServerOptions) (Server, error) {
	h := &rpcxHandler{sleep: o.Sleep}
	srv := rpcxserver.NewServer()
	if err := srv.RegisterName("Hello", &RPCXHello{h: h}, ""); err != nil {
		return nil, err
	}
	if err := srv.RegisterName("MathService", RPCXMath{}, ""); err != nil {
		return nil, err
	}
	if err := srv.RegisterName("LogService", &RPCXLog{h: h}, ""); err != nil {
		return nil, err
	}
	return &rpcxServer{counter: &h.counter, srv: srv}, nil
}

func (s *rpcxServer) Serve(lis net.Listener) error {
	err := s.srv.ServeListener("tcp", lis)
	// rpcx serves through cmux, whose "mux: server closed" error has no
	// exported sentinel in rpcx's API.
	if err == nil || errors.Is(err, rpcxserver.ErrServerClosed) || errors.Is(err, net.ErrClosed) ||
		strings.Contains(err.Error(), "server closed") {
		return nil
	}
	return err
}

func (s *rpcxServer) Close() error    { return s.srv.Close() }
func (s *rpcxServer) Received() int64 { return s.counter.Received() }

type rpcxClient struct {
	rr      roundRobin
	clients []*rpcxclient.Client
	msg     *benchpb.BenchmarkMessage
	batch   *benchmsg.LogBatch
}

func dialRPCX(ctx context.Context, addr string, o ClientOptions) (Client, error) {
	c := &rpcxClient{msg: benchpb.New(), batch: newProtoBatch()}
	opt := rpcxclient.DefaultOption
	opt.SerializeType = rpcxproto.ProtoBuffer
	for range conns(o) {
		cl := rpcxclient.NewClient(opt)
		if err := cl.Connect("tcp", addr); err != nil {
			c.Close()
			return nil, err
		}
		c.clients = append(c.clients, cl)
	}
	return c, nil
}

func (c *rpcxClient) client() *rpcxclient.Client { return c.clients[c.rr.pick(len(c.clients))] }

func (c *rpcxClient) Echo(ctx context.Context) error {
	out := new(benchpb.BenchmarkMessage)
	if err := c.client().Call(ctx, "Hello", "Say", c.msg, out); err != nil {
		return err
	}
	return checkEcho(out.GetField1(), out.GetField2(), out.GetField3(), out.GetField9())
}

func (c *rpcxClient) Add(ctx context.Context, a, b int32) (int32, error) {
	out := new(benchmsg.AddReply)
	if err := c.client().Call(ctx, "MathService", "Add", &benchmsg.AddRequest{A: a, B: b}, out); err != nil {
		return 0, err
	}
	return out.X, checkAdd(a, b, out.X)
}

func (c *rpcxClient) Log(ctx context.Context) error {
	out := new(benchmsg.LogReply)
	if err := c.client().Call(ctx, "LogService", "Log", c.batch, out); err != nil {
		return err
	}
	return checkLogCount(int(out.Count))
}

func (c *rpcxClient) LogOneway(context.Context) error { return ErrUnsupported }

func (c *rpcxClient) Close() error {
	for _, cl := range c.clients {
		cl.Close()
	}
	return nil
}
