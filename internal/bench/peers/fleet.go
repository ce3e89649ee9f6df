package peers

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/compress"
	"github.com/fleetrpc/fleet/internal/bench/benchmsg"
	"github.com/fleetrpc/fleet/internal/benchpb"
	"github.com/fleetrpc/fleet/server"
)

// The Fleet peer: server.New and client.Dial with their defaults and the
// protobuf codec, the same protobuf messages as gRPC. N connections = N
// clients used round robin; LogOneway is client.Send; Compress turns on zstd
// for payloads from 512 bytes.

func init() {
	Register(&Peer{
		Name:       Fleet,
		Title:      "Fleet",
		Desc:       "server.New and client.Dial with default options, protobuf codec; N connections = N clients used round robin",
		Ops:        []Op{OpEcho, OpAdd, OpLog, OpLogOneway},
		OnewayDesc: "client.Send (oneway frame)",
		NewServer:  newFleetServer,
		Dial:       dialFleet,
	})
}

// FleetHello is the echo service.
type FleetHello struct{ sleep time.Duration }

// Say answers the benchmark message with field1 = "OK" and field2 = 100.
func (h *FleetHello) Say(ctx context.Context, args *benchpb.BenchmarkMessage, reply *benchpb.BenchmarkMessage) error {
	sleep(ctx, h.sleep)
	copyBenchmarkMessage(reply, args)
	ok, n := EchoField1, int32(EchoField2)
	reply.Field1, reply.Field2 = &ok, &n
	return nil
}

// FleetMath is MathService.
type FleetMath struct{}

// Add sets reply.X = A + B.
func (FleetMath) Add(_ context.Context, args *benchmsg.AddRequest, reply *benchmsg.AddReply) error {
	reply.X = args.A + args.B
	return nil
}

// FleetLog is the log service; Log serves both acknowledged calls and
// oneway sends.
type FleetLog struct{ c *counter }

// Log counts the entries of a batch.
func (l *FleetLog) Log(_ context.Context, args *benchmsg.LogBatch, reply *benchmsg.LogReply) error {
	l.c.n.Add(int64(len(args.Entries)))
	reply.Code, reply.Count = benchmsg.ResultCode_OK, int32(len(args.Entries))
	return nil
}

type fleetServer struct {
	counter
	srv *server.Server
}

func newFleetServer(o ServerOptions) (Server, error) {
	s := &fleetServer{srv: server.New()}
	if err := s.srv.RegisterName("Hello", &FleetHello{sleep: o.Sleep}); err != nil {
		return nil, err
	}
	if err := s.srv.RegisterName("MathService", FleetMath{}); err != nil {
		return nil, err
	}
	if err := s.srv.RegisterName("LogService", &FleetLog{c: &s.counter}); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *fleetServer) Serve(lis net.Listener) error {
	err := s.srv.Serve(lis)
	if errors.Is(err, server.ErrServerClosed) {
		return nil
	}
	return err
}

func (s *fleetServer) Close() error { return s.srv.Close() }

type fleetClient struct {
	rr      roundRobin
	clients []*client.Client
	msg     *benchpb.BenchmarkMessage
	batch   *benchmsg.LogBatch
}

func dialFleet(ctx context.Context, addr string, o ClientOptions) (Client, error) {
	opts := []client.Option{client.WithCodec(codec.Protobuf)}
	if o.Compress {
		opts = append(opts, client.WithCompression(compress.Zstd, 512))
	}
	c := &fleetClient{msg: benchpb.New(), batch: newProtoBatch()}
	for range conns(o) {
		cl, err := client.Dial(ctx, "tcp", addr, opts...)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.clients = append(c.clients, cl)
	}
	return c, nil
}

func (c *fleetClient) client() *client.Client { return c.clients[c.rr.pick(len(c.clients))] }

func (c *fleetClient) Echo(ctx context.Context) error {
	out := new(benchpb.BenchmarkMessage)
	if err := c.client().Call(ctx, "Hello", "Say", c.msg, out); err != nil {
		return err
	}
	return checkEcho(out.GetField1(), out.GetField2(), out.GetField3(), out.GetField9())
}

func (c *fleetClient) Add(ctx context.Context, a, b int32) (int32, error) {
	out := new(benchmsg.AddReply)
	if err := c.client().Call(ctx, "MathService", "Add", &benchmsg.AddRequest{A: a, B: b}, out); err != nil {
		return 0, err
	}
	return out.X, checkAdd(a, b, out.X)
}

func (c *fleetClient) Log(ctx context.Context) error {
	out := new(benchmsg.LogReply)
	if err := c.client().Call(ctx, "LogService", "Log", c.batch, out); err != nil {
		return err
	}
	return checkLogCount(int(out.Count))
}

func (c *fleetClient) LogOneway(ctx context.Context) error {
	return c.client().Send(ctx, "LogService", "Log", c.batch)
}

func (c *fleetClient) Close() error {
	for _, cl := range c.clients {
		cl.Close()
	}
	return nil
}

// copyBenchmarkMessage copies src's fields into dst (sharing their
// pointers), which is what rpcx-benchmark's `*reply = *args` does without
// copying the message's internal state.
func copyBenchmarkMessage(dst, src *benchpb.BenchmarkMessage) {
	dst.Field1 = src.Field1
	dst.Field9 = src.Field9
	dst.Field18 = src.Field18
	dst.Field80 = src.Field80
	dst.Field81 = src.Field81
	dst.Field2 = src.Field2
	dst.Field3 = src.Field3
	dst.Field280 = src.Field280
	dst.Field6 = src.Field6
	dst.Field22 = src.Field22
	dst.Field4 = src.Field4
	dst.Field5 = src.Field5
	dst.Field59 = src.Field59
	dst.Field7 = src.Field7
	dst.Field16 = src.Field16
	dst.Field130 = src.Field130
	dst.Field12 = src.Field12
	dst.Field17 = src.Field17
	dst.Field13 = src.Field13
	dst.Field14 = src.Field14
	dst.Field104 = src.Field104
	dst.Field100 = src.Field100
	dst.Field101 = src.Field101
	dst.Field102 = src.Field102
	dst.Field103 = src.Field103
	dst.Field29 = src.Field29
	dst.Field30 = src.Field30
	dst.Field60 = src.Field60
	dst.Field271 = src.Field271
	dst.Field272 = src.Field272
	dst.Field150 = src.Field150
	dst.Field23 = src.Field23
	dst.Field24 = src.Field24
	dst.Field25 = src.Field25
	dst.Field78 = src.Field78
	dst.Field67 = src.Field67
	dst.Field68 = src.Field68
	dst.Field128 = src.Field128
	dst.Field129 = src.Field129
	dst.Field131 = src.Field131
}
