package peers

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/fleetrpc/fleet/bench/benchmsg"
	"github.com/fleetrpc/fleet/bench/vtmsg"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/compress"
	"github.com/fleetrpc/fleet/internal/benchpb"
	"github.com/fleetrpc/fleet/internal/gencodemsg"
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
		NewServer:  func(o ServerOptions) (Server, error) { return newFleetServer(o, registerPointer) },
		Dial:       dialFleet,
	})
	// The same peer with the echo service registered the two other ways,
	// to compare registrations (the math and log services stay by pointer).
	Register(&Peer{
		Name:       FleetTyped,
		Title:      "Fleet (typed Handle)",
		Desc:       "as fleet, with Hello.Say registered by server.Handle (typed, no reflection per call)",
		Ops:        []Op{OpEcho, OpAdd, OpLog, OpLogOneway},
		OnewayDesc: "client.Send (oneway frame)",
		NewServer:  func(o ServerOptions) (Server, error) { return newFleetServer(o, registerTyped) },
		Dial:       dialFleet,
		Variant:    true,
	})
	Register(&Peer{
		Name:       FleetValue,
		Title:      "Fleet (value receiver)",
		Desc:       "as fleet, with Hello.Say on a value receiver (Register, called through reflect)",
		Ops:        []Op{OpEcho, OpAdd, OpLog, OpLogOneway},
		OnewayDesc: "client.Send (oneway frame)",
		NewServer:  func(o ServerOptions) (Server, error) { return newFleetServer(o, registerValue) },
		Dial:       dialFleet,
		Variant:    true,
	})
}

// registerPointer serves Hello.Say on a pointer receiver (net/rpc style).
func registerPointer(s *server.Server, sleep time.Duration) error {
	return s.RegisterName("Hello", &FleetHello{sleep: sleep})
}

// registerTyped serves Hello.Say with server.Handle.
func registerTyped(s *server.Server, sleep time.Duration) error {
	h := &FleetHello{sleep: sleep}
	return server.Handle(s, "Hello", "Say", h.Say)
}

// registerValue serves Hello.Say on a value receiver.
func registerValue(s *server.Server, sleep time.Duration) error {
	return s.RegisterName("Hello", FleetHelloValue{sleep: sleep})
}

// FleetHello is the echo service.
type FleetHello struct{ sleep time.Duration }

// Say answers the benchmark message with field1 = "OK" and field2 = 100.
func (h *FleetHello) Say(ctx context.Context, args *benchpb.BenchmarkMessage, reply *benchpb.BenchmarkMessage) error {
	sleep(ctx, h.sleep)
	benchpb.Echo(reply, args)
	return nil
}

// FleetHelloValue is FleetHello with a value receiver.
type FleetHelloValue struct{ sleep time.Duration }

// Say answers as FleetHello.Say does.
func (h FleetHelloValue) Say(ctx context.Context, args *benchpb.BenchmarkMessage, reply *benchpb.BenchmarkMessage) error {
	sleep(ctx, h.sleep)
	benchpb.Echo(reply, args)
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

func newFleetServer(o ServerOptions, hello func(*server.Server, time.Duration) error, opts ...server.Option) (Server, error) {
	s := &fleetServer{srv: server.New(opts...)}
	if err := hello(s.srv, o.Sleep); err != nil {
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
	return dialFleetWith(ctx, addr, o)
}

// dialFleetWith is dialFleet with extra client options.
func dialFleetWith(ctx context.Context, addr string, o ClientOptions, extra ...client.Option) (Client, error) {
	opts := append([]client.Option{client.WithCodec(codec.Protobuf)}, extra...)
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

func init() {
	Register(&Peer{
		Name:       FleetVT,
		Title:      "Fleet (vtprotobuf)",
		Desc:       "as fleet, with the echo message generated by protoc-gen-go-vtproto as well, whose SizeVT, MarshalToSizedBufferVT and UnmarshalVT Fleet's protobuf codec then uses (same wire bytes)",
		Ops:        []Op{OpEcho, OpAdd, OpLog, OpLogOneway},
		OnewayDesc: "client.Send (oneway frame)",
		NewServer:  func(o ServerOptions) (Server, error) { return newFleetServer(o, registerVT) },
		Dial: func(ctx context.Context, addr string, o ClientOptions) (Client, error) {
			c, err := dialFleetWith(ctx, addr, o)
			if err != nil {
				return nil, err
			}
			return &fleetVTClient{fleetClient: c.(*fleetClient), msg: vtmsg.New()}, nil
		},
		Variant: true,
	})
}

// registerVT serves Hello.Say on the vtprotobuf message.
func registerVT(s *server.Server, sleep time.Duration) error {
	return s.RegisterName("Hello", &FleetHelloVT{sleep: sleep})
}

// FleetHelloVT is FleetHello on the vtprotobuf message.
type FleetHelloVT struct{ sleep time.Duration }

// Say answers as FleetHello.Say does.
func (h *FleetHelloVT) Say(ctx context.Context, args *vtmsg.BenchmarkMessage, reply *vtmsg.BenchmarkMessage) error {
	sleep(ctx, h.sleep)
	vtmsg.Echo(reply, args)
	return nil
}

// fleetVTClient is the Fleet client echoing the vtprotobuf message.
type fleetVTClient struct {
	*fleetClient
	msg *vtmsg.BenchmarkMessage
}

func (c *fleetVTClient) Echo(ctx context.Context) error {
	out := new(vtmsg.BenchmarkMessage)
	if err := c.client().Call(ctx, "Hello", "Say", c.msg, out); err != nil {
		return err
	}
	return checkEcho(out.GetField1(), out.GetField2(), out.GetField3(), out.GetField9())
}

func init() {
	Register(&Peer{
		Name:  FleetGencode,
		Title: "Fleet (gencode)",
		Desc: "as fleet, with the echo message generated by gencode (internal/gencodemsg) and the client's codec " +
			"client.WithCodec(codec.Gencode); echo only",
		Ops:       []Op{OpEcho},
		NewServer: func(o ServerOptions) (Server, error) { return newFleetServer(o, registerGencode) },
		Dial: func(ctx context.Context, addr string, o ClientOptions) (Client, error) {
			c, err := dialFleetWith(ctx, addr, o, client.WithCodec(codec.Gencode))
			if err != nil {
				return nil, err
			}
			return &fleetGencodeClient{fleetClient: c.(*fleetClient), msg: gencodemsg.New()}, nil
		},
		Variant: true,
	})
}

// registerGencode serves Hello.Say on the gencode message.
func registerGencode(s *server.Server, sleep time.Duration) error {
	return s.RegisterName("Hello", &FleetHelloGencode{sleep: sleep})
}

// FleetHelloGencode is FleetHello on the gencode message.
type FleetHelloGencode struct{ sleep time.Duration }

// Say answers as FleetHello.Say does.
func (h *FleetHelloGencode) Say(ctx context.Context, args *gencodemsg.BenchmarkMessage, reply *gencodemsg.BenchmarkMessage) error {
	sleep(ctx, h.sleep)
	gencodemsg.Echo(reply, args)
	return nil
}

// fleetGencodeClient is the Fleet client echoing the gencode message; its
// connections use codec.Gencode for every call, so Add and Log (protobuf
// messages) are not offered.
type fleetGencodeClient struct {
	*fleetClient
	msg *gencodemsg.BenchmarkMessage
}

func (c *fleetGencodeClient) Echo(ctx context.Context) error {
	out := new(gencodemsg.BenchmarkMessage)
	if err := c.client().Call(ctx, "Hello", "Say", c.msg, out); err != nil {
		return err
	}
	return checkEcho(out.Field1, out.Field2, out.Field3, out.Field9)
}

func (c *fleetGencodeClient) Add(context.Context, int32, int32) (int32, error) {
	return 0, ErrUnsupported
}
func (c *fleetGencodeClient) Log(context.Context) error       { return ErrUnsupported }
func (c *fleetGencodeClient) LogOneway(context.Context) error { return ErrUnsupported }
