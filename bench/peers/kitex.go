package peers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	kclient "github.com/cloudwego/kitex/client"
	"github.com/cloudwego/kitex/pkg/connpool"
	"github.com/cloudwego/kitex/pkg/kerrors"
	"github.com/cloudwego/kitex/pkg/klog"
	"github.com/cloudwego/kitex/pkg/serviceinfo"
	kserver "github.com/cloudwego/kitex/server"
	"google.golang.org/protobuf/proto"

	"github.com/fleetrpc/fleet/bench/benchmsg"
	"github.com/fleetrpc/fleet/internal/benchpb"
)

// The Kitex peers: github.com/cloudwego/kitex with Kitex's own protobuf
// payload codec (KitexProtobuf framing over netpoll), set up as
// cloudwego/kitex-benchmark's protobuf/kitex and protobuf/kitex-mux
// programs set it up:
//
//   - kitex: the default server; the client's long-connection pool with
//     kitex-benchmark's IdleConfig{MaxIdlePerAddress: 1000, MaxIdleGlobal:
//     1000, MaxIdleTimeout: time.Minute}: a connection per concurrent
//     call, so ClientOptions.Conns does not apply;
//   - kitex-mux: the server with WithMuxTransport and the client with
//     WithMuxConnection(ClientOptions.Conns) (kitex-benchmark uses 2): calls
//     multiplexed over that many connections, TTHeader framing.
//
// The service definition is written by hand, as the kitex tool would
// generate it from a .proto file (the tool is not installed here): a
// serviceinfo.ServiceInfo whose methods' argument and result wrappers
// implement Kitex's protobuf codec contract (Marshal(out []byte) ([]byte,
// error) and Unmarshal(in []byte) error, with proto.Marshal and
// proto.Unmarshal as the generated code has them). One service, "Bench",
// has both methods, Say (the echo) and Add.
//
// The client's connect timeout is 1 s instead of Kitex's 50 ms, so that
// opening 1000 pooled connections on a loaded machine does not fail calls;
// it changes nothing once the connections are open.

func init() {
	Register(&Peer{
		Name:  Kitex,
		Title: "Kitex",
		Desc: "github.com/cloudwego/kitex v0.16.3 as kitex-benchmark uses it: KitexProtobuf codec, default server, client " +
			"WithLongConnection(MaxIdlePerAddress 1000, MaxIdleGlobal 1000, MaxIdleTimeout 1m): a connection per concurrent call",
		Ops:       []Op{OpEcho, OpAdd},
		NewServer: func(o ServerOptions) (Server, error) { return newKitexServer(o, false) },
		Dial: func(ctx context.Context, addr string, o ClientOptions) (Client, error) {
			return dialKitex(addr, o, false)
		},
	})
	Register(&Peer{
		Name:  KitexMux,
		Title: "Kitex (mux)",
		Desc: "github.com/cloudwego/kitex v0.16.3 as kitex-benchmark's kitex-mux: KitexProtobuf codec, server WithMuxTransport, " +
			"client WithMuxConnection(N): calls multiplexed over N connections",
		Ops:       []Op{OpEcho, OpAdd},
		NewServer: func(o ServerOptions) (Server, error) { return newKitexServer(o, true) },
		Dial: func(ctx context.Context, addr string, o ClientOptions) (Client, error) {
			return dialKitex(addr, o, true)
		},
	})
}

// kitexQuiet turns Kitex's logs off once: it logs every failed call, and
// the harness reports failures itself.
var kitexQuiet = sync.OnceFunc(func() { klog.SetLevel(klog.LevelFatal) })

// kitexBench is the handler type of the Bench service.
type kitexBench interface {
	Say(ctx context.Context, in *benchpb.BenchmarkMessage) (*benchpb.BenchmarkMessage, error)
	Add(ctx context.Context, in *benchmsg.AddRequest) (*benchmsg.AddReply, error)
}

var errKitexArg = errors.New("kitex: unexpected argument type")

// kitexServiceInfo is the Bench service as the kitex tool would describe
// it.
var kitexServiceInfo = &serviceinfo.ServiceInfo{
	ServiceName: "Bench",
	HandlerType: (*kitexBench)(nil),
	Methods: map[string]serviceinfo.MethodInfo{
		"Say": serviceinfo.NewMethodInfo(
			func(ctx context.Context, h, arg, result any) error {
				a, ok := arg.(*kitexSayArgs)
				if !ok {
					return errKitexArg
				}
				out, err := h.(kitexBench).Say(ctx, a.Req)
				if err != nil {
					return err
				}
				result.(*kitexSayResult).Success = out
				return nil
			},
			func() any { return new(kitexSayArgs) },
			func() any { return new(kitexSayResult) },
			false),
		"Add": serviceinfo.NewMethodInfo(
			func(ctx context.Context, h, arg, result any) error {
				a, ok := arg.(*kitexAddArgs)
				if !ok {
					return errKitexArg
				}
				out, err := h.(kitexBench).Add(ctx, a.Req)
				if err != nil {
					return err
				}
				result.(*kitexAddResult).Success = out
				return nil
			},
			func() any { return new(kitexAddArgs) },
			func() any { return new(kitexAddResult) },
			false),
	},
	PayloadCodec:    serviceinfo.Protobuf,
	KiteXGenVersion: "v0.16.3",
	Extra:           map[string]any{"PackageName": "fleetbench"},
}

// The argument and result wrappers, one pair per method. Marshal ignores
// out, as the generated code does.

type kitexSayArgs struct{ Req *benchpb.BenchmarkMessage }

func (p *kitexSayArgs) Marshal(out []byte) ([]byte, error) { return kitexMarshal(out, p.Req) }
func (p *kitexSayArgs) Unmarshal(in []byte) error {
	p.Req = new(benchpb.BenchmarkMessage)
	return proto.Unmarshal(in, p.Req)
}
func (p *kitexSayArgs) GetFirstArgument() any { return p.Req }

type kitexSayResult struct{ Success *benchpb.BenchmarkMessage }

func (p *kitexSayResult) Marshal(out []byte) ([]byte, error) { return kitexMarshal(out, p.Success) }
func (p *kitexSayResult) Unmarshal(in []byte) error {
	p.Success = new(benchpb.BenchmarkMessage)
	return proto.Unmarshal(in, p.Success)
}
func (p *kitexSayResult) GetResult() any     { return p.Success }
func (p *kitexSayResult) SetSuccess(x any)   { p.Success, _ = x.(*benchpb.BenchmarkMessage) }
func (p *kitexSayResult) IsSetSuccess() bool { return p.Success != nil }

type kitexAddArgs struct{ Req *benchmsg.AddRequest }

func (p *kitexAddArgs) Marshal(out []byte) ([]byte, error) { return kitexMarshal(out, p.Req) }
func (p *kitexAddArgs) Unmarshal(in []byte) error {
	p.Req = new(benchmsg.AddRequest)
	return proto.Unmarshal(in, p.Req)
}
func (p *kitexAddArgs) GetFirstArgument() any { return p.Req }

type kitexAddResult struct{ Success *benchmsg.AddReply }

func (p *kitexAddResult) Marshal(out []byte) ([]byte, error) { return kitexMarshal(out, p.Success) }
func (p *kitexAddResult) Unmarshal(in []byte) error {
	p.Success = new(benchmsg.AddReply)
	return proto.Unmarshal(in, p.Success)
}
func (p *kitexAddResult) GetResult() any     { return p.Success }
func (p *kitexAddResult) SetSuccess(x any)   { p.Success, _ = x.(*benchmsg.AddReply) }
func (p *kitexAddResult) IsSetSuccess() bool { return p.Success != nil }

func kitexMarshal[M proto.Message](out []byte, m M) ([]byte, error) {
	if !m.ProtoReflect().IsValid() {
		return out, nil
	}
	return proto.Marshal(m)
}

// kitexHandler serves the Bench service.
type kitexHandler struct{ sleep time.Duration }

func (h *kitexHandler) Say(ctx context.Context, in *benchpb.BenchmarkMessage) (*benchpb.BenchmarkMessage, error) {
	sleep(ctx, h.sleep)
	out := new(benchpb.BenchmarkMessage)
	benchpb.Echo(out, in)
	return out, nil
}

func (h *kitexHandler) Add(_ context.Context, in *benchmsg.AddRequest) (*benchmsg.AddReply, error) {
	return &benchmsg.AddReply{X: in.A + in.B}, nil
}

type kitexServer struct {
	counter
	o    ServerOptions
	mux  bool
	exit chan error

	mu     sync.Mutex
	closed bool
}

func newKitexServer(o ServerOptions, mux bool) (Server, error) {
	kitexQuiet()
	return &kitexServer{o: o, mux: mux, exit: make(chan error, 1)}, nil
}

// Serve builds the Kitex server on lis and runs it until Close.
func (s *kitexServer) Serve(lis net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		lis.Close()
		return nil
	}
	s.mu.Unlock()
	opts := []kserver.Option{
		kserver.WithListener(lis),
		kserver.WithExitSignal(func() <-chan error { return s.exit }),
		kserver.WithExitWaitTime(time.Second),
	}
	if s.mux {
		opts = append(opts, kserver.WithMuxTransport())
	}
	srv := kserver.NewServer(opts...)
	if err := srv.RegisterService(kitexServiceInfo, &kitexHandler{sleep: s.o.Sleep}); err != nil {
		return err
	}
	if err := srv.Run(); err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("kitex: %w", err)
	}
	return nil
}

// Close asks Run to stop; Kitex then closes the listener and, after up to
// its exit wait time, the connections.
func (s *kitexServer) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		s.exit <- nil
	}
	return nil
}

type kitexClient struct {
	c   kclient.Client
	msg *benchpb.BenchmarkMessage

	// Kitex's mux pool (netpollmux.MuxPool, which Kitex marks deprecated)
	// fills its connection slots without a lock while other calls read
	// them: a data race until every slot is filled. The first muxConns
	// calls are therefore Add calls made one at a time (each fills one
	// slot; see warm); once warmed reaches muxConns, calls run
	// concurrently.
	muxConns int32
	warmMu   sync.Mutex
	warmed   atomic.Int32
}

// call makes one Kitex call, serializing the mux pool's first calls.
//
// Kitex turns the context's deadline into its own RPC timeout, whose timer
// can fire an instant before the context reports it: such a timeout is
// returned as the context's error, as the other peers return it.
func (c *kitexClient) call(ctx context.Context, method string, args, res any) error {
	err := c.call1(ctx, method, args, res)
	if err != nil && errors.Is(err, kerrors.ErrRPCTimeout) {
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < 10*time.Millisecond {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	return err
}

func (c *kitexClient) call1(ctx context.Context, method string, args, res any) error {
	if c.warmed.Load() < c.muxConns {
		if done, err := c.warm(ctx, method, args, res); done {
			return err
		}
	}
	return c.c.Call(ctx, method, args, res)
}

// warm fills the mux pool's slots with Add calls made one at a time, before
// any call runs concurrently. A call that is itself an Add serves as one of
// them (done is then true), so that the short-connection test makes no
// extra call; any other call waits for the cheap Add calls, not for a
// handler that may sleep.
func (c *kitexClient) warm(ctx context.Context, method string, args, res any) (done bool, err error) {
	c.warmMu.Lock()
	defer c.warmMu.Unlock()
	for c.warmed.Load() < c.muxConns {
		if method == "Add" {
			if err := c.c.Call(ctx, method, args, res); err != nil {
				return true, err
			}
			c.warmed.Add(1)
			return true, nil
		}
		var r kitexAddResult
		if err := c.c.Call(ctx, "Add", &kitexAddArgs{Req: &benchmsg.AddRequest{}}, &r); err != nil {
			return true, err
		}
		c.warmed.Add(1)
	}
	return false, nil
}

func dialKitex(addr string, o ClientOptions, mux bool) (Client, error) {
	kitexQuiet()
	opts := []kclient.Option{
		kclient.WithHostPorts(addr),
		kclient.WithDestService("Bench"),
		kclient.WithConnectTimeout(time.Second),
	}
	if mux {
		opts = append(opts, kclient.WithMuxConnection(conns(o)))
	} else {
		opts = append(opts, kclient.WithLongConnection(connpool.IdleConfig{
			MaxIdlePerAddress: 1000, MaxIdleGlobal: 1000, MaxIdleTimeout: time.Minute,
		}))
	}
	c, err := kclient.NewClient(kitexServiceInfo, opts...)
	if err != nil {
		return nil, err
	}
	kc := &kitexClient{c: c, msg: benchpb.New()}
	if mux {
		kc.muxConns = int32(conns(o))
	}
	return kc, nil
}

func (c *kitexClient) Echo(ctx context.Context) error {
	var res kitexSayResult
	if err := c.call(ctx, "Say", &kitexSayArgs{Req: c.msg}, &res); err != nil {
		return err
	}
	out := res.Success
	if out == nil {
		return errors.New("kitex: empty echo reply")
	}
	return checkEcho(out.GetField1(), out.GetField2(), out.GetField3(), out.GetField9())
}

func (c *kitexClient) Add(ctx context.Context, a, b int32) (int32, error) {
	var res kitexAddResult
	if err := c.call(ctx, "Add", &kitexAddArgs{Req: &benchmsg.AddRequest{A: a, B: b}}, &res); err != nil {
		return 0, err
	}
	if res.Success == nil {
		return 0, errors.New("kitex: empty Add reply")
	}
	return res.Success.X, checkAdd(a, b, res.Success.X)
}

func (c *kitexClient) Log(context.Context) error       { return ErrUnsupported }
func (c *kitexClient) LogOneway(context.Context) error { return ErrUnsupported }

// Close releases the client's connections (kclient.Client has Close
// through io.Closer).
func (c *kitexClient) Close() error {
	if cl, ok := c.c.(interface{ Close() error }); ok {
		return cl.Close()
	}
	return nil
}
