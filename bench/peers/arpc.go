package peers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/lesismal/arpc"
	arpccodec "github.com/lesismal/arpc/codec"
	arpclog "github.com/lesismal/arpc/log"
	"google.golang.org/protobuf/proto"

	"github.com/fleetrpc/fleet/bench/benchmsg"
	"github.com/fleetrpc/fleet/internal/benchpb"
)

// The arpc peer: github.com/lesismal/arpc, set up as kitex-benchmark's
// protobuf/arpc client and server set it up: arpc's logs off, a protobuf
// codec as arpc's codec.DefaultCodec, arpc.EnablePool(true) (pooled
// contexts, messages and buffers), an arpc.ClientPool of
// ClientOptions.Conns clients picked round robin (Next), CallWith with the
// caller's context. Handlers run as arpc's benchmark registers them:
// synchronously in the connection's reading goroutine; only a handler that
// sleeps (the handler-latency scenario) is registered asynchronous (arpc's
// Handle(method, h, true): a goroutine per call), since a sleeping handler
// in the reading goroutine would hold every other call on the connection.

func init() {
	Register(&Peer{
		Name:  ARPC,
		Title: "arpc",
		Desc: "github.com/lesismal/arpc v1.2.17 as kitex-benchmark uses it: protobuf codec, logs off, EnablePool(true), " +
			"ClientPool of N clients used round robin, handlers in the reading goroutine (asynchronous only when the handler sleeps)",
		Ops:       []Op{OpEcho, OpAdd},
		NewServer: newARPCServer,
		Dial:      dialARPC,
	})
}

// arpcProto is the protobuf codec arpc's benchmark installs; it uses the
// same google.golang.org/protobuf runtime as the gRPC and Fleet peers.
type arpcProto struct{}

func (arpcProto) Marshal(v any) ([]byte, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("arpc: %T is not a protobuf message", v)
	}
	return proto.Marshal(m)
}

func (arpcProto) Unmarshal(data []byte, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("arpc: %T is not a protobuf message", v)
	}
	return proto.Unmarshal(data, m)
}

// arpcSetup applies arpc's process-wide settings once, before the first
// server or client: they are globals in arpc, as in its benchmark.
var arpcSetup = sync.OnceFunc(func() {
	arpclog.SetLevel(arpclog.LevelNone)
	arpccodec.SetCodec(arpcProto{})
	arpc.EnablePool(true)
})

type arpcServer struct {
	counter
	srv   *arpc.Server
	mu    sync.Mutex
	lis   net.Listener
	close bool
}

func newARPCServer(o ServerOptions) (Server, error) {
	arpcSetup()
	s := &arpcServer{srv: arpc.NewServer()}
	sleepFor := o.Sleep
	s.srv.Handler.Handle("Hello.Say", func(ctx *arpc.Context) {
		in := new(benchpb.BenchmarkMessage)
		if err := ctx.Bind(in); err != nil {
			ctx.Error(err)
			return
		}
		sleep(context.Background(), sleepFor)
		out := new(benchpb.BenchmarkMessage)
		benchpb.Echo(out, in)
		ctx.Write(out)
	}, sleepFor > 0)
	s.srv.Handler.Handle("MathService.Add", func(ctx *arpc.Context) {
		in := new(benchmsg.AddRequest)
		if err := ctx.Bind(in); err != nil {
			ctx.Error(err)
			return
		}
		ctx.Write(&benchmsg.AddReply{X: in.A + in.B})
	})
	return s, nil
}

func (s *arpcServer) Serve(lis net.Listener) error {
	s.mu.Lock()
	if s.close {
		s.mu.Unlock()
		lis.Close()
		return nil
	}
	s.lis = lis
	s.mu.Unlock()
	err := s.srv.Serve(lis)
	s.mu.Lock()
	closed := s.close
	s.mu.Unlock()
	if closed || err == nil || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// Close stops the server: arpc's Stop closes the listener, and the accept
// loop's exit closes the connections.
func (s *arpcServer) Close() error {
	s.mu.Lock()
	s.close = true
	lis := s.lis
	s.mu.Unlock()
	if lis == nil {
		return nil
	}
	if err := s.srv.Stop(); err != nil && !errors.Is(err, arpc.ErrTimeout) {
		return err
	}
	return nil
}

type arpcClient struct {
	pool *arpc.ClientPool
	msg  *benchpb.BenchmarkMessage
}

func dialARPC(ctx context.Context, addr string, o ClientOptions) (Client, error) {
	arpcSetup()
	pool, err := arpc.NewClientPool(func() (net.Conn, error) {
		d := net.Dialer{Timeout: 5 * time.Second}
		return d.DialContext(ctx, "tcp", addr)
	}, conns(o))
	if err != nil {
		return nil, err
	}
	return &arpcClient{pool: pool, msg: benchpb.New()}, nil
}

func (c *arpcClient) Echo(ctx context.Context) error {
	out := new(benchpb.BenchmarkMessage)
	if err := c.pool.Next().CallWith(ctx, "Hello.Say", c.msg, out); err != nil {
		return err
	}
	return checkEcho(out.GetField1(), out.GetField2(), out.GetField3(), out.GetField9())
}

func (c *arpcClient) Add(ctx context.Context, a, b int32) (int32, error) {
	out := new(benchmsg.AddReply)
	if err := c.pool.Next().CallWith(ctx, "MathService.Add", &benchmsg.AddRequest{A: a, B: b}, out); err != nil {
		return 0, err
	}
	return out.X, checkAdd(a, b, out.X)
}

func (c *arpcClient) Log(context.Context) error       { return ErrUnsupported }
func (c *arpcClient) LogOneway(context.Context) error { return ErrUnsupported }

func (c *arpcClient) Close() error {
	c.pool.Stop()
	return nil
}
