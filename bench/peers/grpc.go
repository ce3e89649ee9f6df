package peers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/fleetrpc/fleet/bench/benchmsg"
	"github.com/fleetrpc/fleet/internal/benchpb"
)

// The gRPC peer: google.golang.org/grpc with protobuf, default options, one
// grpc.ClientConn per connection. The service descriptors are written by
// hand (what protoc-gen-go-grpc would generate) so that the binary registers
// each protobuf message once: BenchmarkMessage comes from internal/benchpb,
// the others from bench/benchmsg.

func init() {
	Register(&Peer{
		Name:       GRPC,
		Title:      "gRPC-go",
		Desc:       "google.golang.org/grpc, protobuf, default options; N connections = N ClientConns used round robin",
		Ops:        []Op{OpEcho, OpAdd, OpLog, OpLogOneway},
		OnewayDesc: "client stream (LogStream), one per connection",
		NewServer:  newGRPCServer,
		Dial:       dialGRPC,
	})
}

type helloServer interface {
	Say(context.Context, *benchpb.BenchmarkMessage) (*benchpb.BenchmarkMessage, error)
}

type mathServer interface {
	Add(context.Context, *benchmsg.AddRequest) (*benchmsg.AddReply, error)
}

type logServer interface {
	Log(context.Context, *benchmsg.LogBatch) (*benchmsg.LogReply, error)
	LogStream(grpc.ServerStream) error
}

var grpcHelloDesc = grpc.ServiceDesc{
	ServiceName: "pb.Hello",
	HandlerType: (*helloServer)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Say",
		Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			in := new(benchpb.BenchmarkMessage)
			if err := dec(in); err != nil {
				return nil, err
			}
			if interceptor == nil {
				return srv.(helloServer).Say(ctx, in)
			}
			info := &grpc.UnaryServerInfo{Server: srv, FullMethod: "/pb.Hello/Say"}
			return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
				return srv.(helloServer).Say(ctx, req.(*benchpb.BenchmarkMessage))
			})
		},
	}},
	Metadata: "benchmark.proto",
}

var grpcMathDesc = grpc.ServiceDesc{
	ServiceName: "fleetbench.MathService",
	HandlerType: (*mathServer)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Add",
		Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			in := new(benchmsg.AddRequest)
			if err := dec(in); err != nil {
				return nil, err
			}
			if interceptor == nil {
				return srv.(mathServer).Add(ctx, in)
			}
			info := &grpc.UnaryServerInfo{Server: srv, FullMethod: "/fleetbench.MathService/Add"}
			return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
				return srv.(mathServer).Add(ctx, req.(*benchmsg.AddRequest))
			})
		},
	}},
	Metadata: "bench/benchmsg/fleetbench.proto",
}

var grpcLogDesc = grpc.ServiceDesc{
	ServiceName: "fleetbench.LogService",
	HandlerType: (*logServer)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Log",
		Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			in := new(benchmsg.LogBatch)
			if err := dec(in); err != nil {
				return nil, err
			}
			if interceptor == nil {
				return srv.(logServer).Log(ctx, in)
			}
			info := &grpc.UnaryServerInfo{Server: srv, FullMethod: "/fleetbench.LogService/Log"}
			return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
				return srv.(logServer).Log(ctx, req.(*benchmsg.LogBatch))
			})
		},
	}},
	Streams: []grpc.StreamDesc{{
		StreamName:    "LogStream",
		ClientStreams: true,
		Handler: func(srv any, stream grpc.ServerStream) error {
			return srv.(logServer).LogStream(stream)
		},
	}},
	Metadata: "bench/benchmsg/fleetbench.proto",
}

var grpcLogStreamDesc = &grpcLogDesc.Streams[0]

type grpcHandler struct {
	counter
	sleep time.Duration
}

func (h *grpcHandler) Say(ctx context.Context, in *benchpb.BenchmarkMessage) (*benchpb.BenchmarkMessage, error) {
	sleep(ctx, h.sleep)
	ok, n := EchoField1, int32(EchoField2)
	in.Field1, in.Field2 = &ok, &n
	return in, nil
}

func (h *grpcHandler) Add(_ context.Context, in *benchmsg.AddRequest) (*benchmsg.AddReply, error) {
	return &benchmsg.AddReply{X: in.A + in.B}, nil
}

func (h *grpcHandler) Log(_ context.Context, in *benchmsg.LogBatch) (*benchmsg.LogReply, error) {
	h.n.Add(int64(len(in.Entries)))
	return &benchmsg.LogReply{Code: benchmsg.ResultCode_OK, Count: int32(len(in.Entries))}, nil
}

func (h *grpcHandler) LogStream(stream grpc.ServerStream) error {
	var total int32
	for {
		in := new(benchmsg.LogBatch)
		if err := stream.RecvMsg(in); err != nil {
			if errors.Is(err, io.EOF) {
				return stream.SendMsg(&benchmsg.LogReply{Code: benchmsg.ResultCode_OK, Count: total})
			}
			return err
		}
		total += int32(len(in.Entries))
		h.n.Add(int64(len(in.Entries)))
	}
}

type grpcServer struct {
	*grpcHandler
	srv *grpc.Server
}

func newGRPCServer(o ServerOptions) (Server, error) {
	h := &grpcHandler{sleep: o.Sleep}
	srv := grpc.NewServer()
	srv.RegisterService(&grpcHelloDesc, h)
	srv.RegisterService(&grpcMathDesc, h)
	srv.RegisterService(&grpcLogDesc, h)
	return &grpcServer{grpcHandler: h, srv: srv}, nil
}

func (s *grpcServer) Serve(lis net.Listener) error {
	err := s.srv.Serve(lis)
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

func (s *grpcServer) Close() error {
	s.srv.Stop()
	return nil
}

// grpcConn is one ClientConn and, for LogOneway, its client stream.
type grpcConn struct {
	cc *grpc.ClientConn

	mu     sync.Mutex
	stream grpc.ClientStream
	cancel context.CancelFunc
}

type grpcClient struct {
	rr    roundRobin
	conns []*grpcConn
	msg   *benchpb.BenchmarkMessage
	batch *benchmsg.LogBatch
}

func dialGRPC(ctx context.Context, addr string, o ClientOptions) (Client, error) {
	c := &grpcClient{msg: benchpb.New(), batch: newProtoBatch()}
	for range conns(o) {
		cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			c.Close()
			return nil, err
		}
		c.conns = append(c.conns, &grpcConn{cc: cc})
		// NewClient is lazy; connect now so that dialling is not
		// measured as part of the first calls.
		cc.Connect()
		for s := cc.GetState(); s != connectivity.Ready; s = cc.GetState() {
			if s == connectivity.TransientFailure || s == connectivity.Shutdown {
				c.Close()
				return nil, fmt.Errorf("grpc: connecting to %s: %v", addr, s)
			}
			if !cc.WaitForStateChange(ctx, s) {
				c.Close()
				return nil, ctx.Err()
			}
		}
	}
	return c, nil
}

func (c *grpcClient) conn() *grpcConn { return c.conns[c.rr.pick(len(c.conns))] }

func (c *grpcClient) Echo(ctx context.Context) error {
	out := new(benchpb.BenchmarkMessage)
	if err := c.conn().cc.Invoke(ctx, "/pb.Hello/Say", c.msg, out); err != nil {
		return err
	}
	return checkEcho(out.GetField1(), out.GetField2(), out.GetField3(), out.GetField9())
}

func (c *grpcClient) Add(ctx context.Context, a, b int32) (int32, error) {
	out := new(benchmsg.AddReply)
	if err := c.conn().cc.Invoke(ctx, "/fleetbench.MathService/Add", &benchmsg.AddRequest{A: a, B: b}, out); err != nil {
		return 0, err
	}
	return out.X, checkAdd(a, b, out.X)
}

func (c *grpcClient) Log(ctx context.Context) error {
	out := new(benchmsg.LogReply)
	if err := c.conn().cc.Invoke(ctx, "/fleetbench.LogService/Log", c.batch, out); err != nil {
		return err
	}
	return checkLogCount(int(out.Count))
}

// LogOneway sends the batch on the connection's client stream, opened on
// first use; a gRPC stream is not safe for concurrent sends, so a mutex
// serializes them.
func (c *grpcClient) LogOneway(ctx context.Context) error {
	g := c.conn()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stream == nil {
		sctx, cancel := context.WithCancel(context.Background())
		s, err := g.cc.NewStream(sctx, grpcLogStreamDesc, "/fleetbench.LogService/LogStream")
		if err != nil {
			cancel()
			return err
		}
		g.stream, g.cancel = s, cancel
	}
	return g.stream.SendMsg(c.batch)
}

func (c *grpcClient) Close() error {
	for _, g := range c.conns {
		g.mu.Lock()
		if g.stream != nil {
			// Finish the stream so the server sees every batch.
			if err := g.stream.CloseSend(); err == nil {
				g.stream.RecvMsg(new(benchmsg.LogReply))
			}
			g.cancel()
			g.stream = nil
		}
		g.mu.Unlock()
		g.cc.Close()
	}
	return nil
}

// newProtoBatch builds the protobuf log batch used by gRPC and Fleet.
func newProtoBatch() *benchmsg.LogBatch {
	b := &benchmsg.LogBatch{Entries: make([]*benchmsg.LogEntry, LogBatchSize)}
	for i := range b.Entries {
		b.Entries[i] = &benchmsg.LogEntry{Hostname: LogHostname, Message: LogLine}
	}
	return b
}
