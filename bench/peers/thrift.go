package peers

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/fleetrpc/fleet/bench/thriftbench"
	"github.com/fleetrpc/fleet/internal/benchpb"
)

// The Thrift peer: github.com/apache/thrift with the binary protocol over the
// framed transport, code generated from bench/idl/bench.thrift and
// served by TSimpleServer (one goroutine per connection, requests on a
// connection handled one at a time). A generated Thrift client is not safe
// for concurrent use, so the client side is a pool of clients, one per
// connection, each used by one caller at a time, as Thrift users do.

func init() {
	Register(&Peer{
		Name:       Thrift,
		Title:      "Thrift",
		Desc:       "github.com/apache/thrift, binary protocol, framed transport, TSimpleServer; a pool of N clients (one connection each), one caller per client at a time",
		Ops:        []Op{OpEcho, OpAdd, OpLog, OpLogOneway},
		OnewayDesc: "oneway method",
		NewServer:  newThriftServer,
		Dial:       dialThrift,
	})
}

var thriftConf = &thrift.TConfiguration{
	ConnectTimeout: 10 * time.Second,
}

type thriftHandler struct {
	counter
	sleep time.Duration
}

func (h *thriftHandler) Say(ctx context.Context, msg *thriftbench.BenchmarkMessage) (*thriftbench.BenchmarkMessage, error) {
	sleep(ctx, h.sleep)
	msg.Field1, msg.Field2 = EchoField1, EchoField2
	return msg, nil
}

func (h *thriftHandler) Add(_ context.Context, a, b int32) (int32, error) { return a + b, nil }

func (h *thriftHandler) Log(_ context.Context, messages []*thriftbench.LogEntry) (thriftbench.ResultCode, error) {
	h.n.Add(int64(len(messages)))
	return thriftbench.ResultCode_OK, nil
}

func (h *thriftHandler) LogOneway(_ context.Context, messages []*thriftbench.LogEntry) error {
	h.n.Add(int64(len(messages)))
	return nil
}

// thriftListener adapts a net.Listener to thrift.TServerTransport.
type thriftListener struct {
	lis   net.Listener
	conns connTracker
}

func (l *thriftListener) Listen() error { return nil }

func (l *thriftListener) Accept() (thrift.TTransport, error) {
	c, err := l.lis.Accept()
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	if !l.conns.add(c) {
		return nil, net.ErrClosed
	}
	return thrift.NewTSocketFromConnConf(c, thriftConf), nil
}

func (l *thriftListener) Close() error     { return l.lis.Close() }
func (l *thriftListener) Interrupt() error { return l.lis.Close() }

type thriftServer struct {
	*thriftHandler
	mu  sync.Mutex
	lis *thriftListener
	srv *thrift.TSimpleServer
}

func newThriftServer(o ServerOptions) (Server, error) {
	return &thriftServer{thriftHandler: &thriftHandler{sleep: o.Sleep}}, nil
}

func (s *thriftServer) Serve(lis net.Listener) error {
	tl := &thriftListener{lis: lis}
	srv := thrift.NewTSimpleServer4(
		thriftbench.NewBenchProcessor(s.thriftHandler),
		tl,
		thrift.NewTFramedTransportFactoryConf(thrift.NewTTransportFactory(), thriftConf),
		thrift.NewTBinaryProtocolFactoryConf(thriftConf),
	)
	s.mu.Lock()
	s.lis, s.srv = tl, srv
	s.mu.Unlock()
	err := srv.Serve()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

func (s *thriftServer) Close() error {
	s.mu.Lock()
	tl, srv := s.lis, s.srv
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	tl.conns.closeAll()
	return srv.Stop()
}

// thriftConn is one pooled client with its own connection.
type thriftConn struct {
	trans  thrift.TTransport
	client *thriftbench.BenchClient
}

type thriftClient struct {
	addr  string
	pool  chan *thriftConn
	n     int
	msg   *thriftbench.BenchmarkMessage
	batch []*thriftbench.LogEntry

	mu     sync.Mutex
	all    map[*thriftConn]struct{}
	closed bool
}

func dialThrift(ctx context.Context, addr string, o ClientOptions) (Client, error) {
	n := conns(o)
	c := &thriftClient{
		addr:  addr,
		pool:  make(chan *thriftConn, n),
		n:     n,
		msg:   newThriftMessage(),
		batch: newThriftBatch(),
		all:   make(map[*thriftConn]struct{}),
	}
	for range n {
		tc, err := c.dial()
		if err != nil {
			c.Close()
			return nil, err
		}
		c.pool <- tc
	}
	return c, nil
}

func (c *thriftClient) dial() (*thriftConn, error) {
	sock := thrift.NewTSocketConf(c.addr, thriftConf)
	trans := thrift.NewTFramedTransportConf(sock, thriftConf)
	if err := trans.Open(); err != nil {
		return nil, err
	}
	if tc, ok := sock.Conn().(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	pf := thrift.NewTBinaryProtocolFactoryConf(thriftConf)
	tc := &thriftConn{trans: trans, client: thriftbench.NewBenchClientFactory(trans, pf)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		trans.Close()
		return nil, net.ErrClosed
	}
	c.all[tc] = struct{}{}
	return tc, nil
}

// do runs f with a pooled client. A client whose call failed is replaced by
// a fresh connection, since its stream may be out of step.
func (c *thriftClient) do(ctx context.Context, f func(*thriftbench.BenchClient) error) error {
	var tc *thriftConn
	select {
	case tc = <-c.pool:
	case <-ctx.Done():
		return ctx.Err()
	}
	if tc == nil {
		// An earlier redial failed; try again.
		var err error
		if tc, err = c.dial(); err != nil {
			c.pool <- nil
			return err
		}
	}
	err := f(tc.client)
	if err != nil {
		c.mu.Lock()
		delete(c.all, tc)
		c.mu.Unlock()
		tc.trans.Close()
		if fresh, derr := c.dial(); derr == nil {
			tc = fresh
		} else {
			tc = nil
		}
	}
	c.pool <- tc
	return err
}

func (c *thriftClient) Echo(ctx context.Context) error {
	return c.do(ctx, func(bc *thriftbench.BenchClient) error {
		out, err := bc.Say(ctx, c.msg)
		if err != nil {
			return err
		}
		return checkEcho(out.Field1, out.Field2, out.Field3, out.Field9)
	})
}

func (c *thriftClient) Add(ctx context.Context, a, b int32) (int32, error) {
	var x int32
	err := c.do(ctx, func(bc *thriftbench.BenchClient) error {
		var err error
		if x, err = bc.Add(ctx, a, b); err != nil {
			return err
		}
		return checkAdd(a, b, x)
	})
	return x, err
}

func (c *thriftClient) Log(ctx context.Context) error {
	return c.do(ctx, func(bc *thriftbench.BenchClient) error {
		code, err := bc.Log(ctx, c.batch)
		if err != nil {
			return err
		}
		if code != thriftbench.ResultCode_OK {
			return errors.New("thrift: Log returned " + code.String())
		}
		return nil
	})
}

func (c *thriftClient) LogOneway(ctx context.Context) error {
	return c.do(ctx, func(bc *thriftbench.BenchClient) error {
		return bc.LogOneway(ctx, c.batch)
	})
}

func (c *thriftClient) Close() error {
	c.mu.Lock()
	c.closed = true
	all := c.all
	c.all = nil
	c.mu.Unlock()
	for tc := range all {
		tc.trans.Close()
	}
	return nil
}

func newThriftMessage() *thriftbench.BenchmarkMessage {
	p := benchpb.NewPlain()
	return &thriftbench.BenchmarkMessage{
		Field1: p.Field1, Field9: p.Field9, Field18: p.Field18, Field80: p.Field80,
		Field81: p.Field81, Field2: p.Field2, Field3: p.Field3, Field280: p.Field280,
		Field6: p.Field6, Field22: p.Field22, Field4: p.Field4, Field59: p.Field59,
		Field7: p.Field7, Field16: p.Field16, Field130: p.Field130, Field12: p.Field12,
		Field17: p.Field17, Field13: p.Field13, Field14: p.Field14, Field104: p.Field104,
		Field100: p.Field100, Field101: p.Field101, Field102: p.Field102, Field103: p.Field103,
		Field29: p.Field29, Field30: p.Field30, Field60: p.Field60, Field271: p.Field271,
		Field272: p.Field272, Field150: p.Field150, Field23: p.Field23, Field24: p.Field24,
		Field25: p.Field25, Field78: p.Field78, Field67: p.Field67, Field68: p.Field68,
		Field128: p.Field128, Field129: p.Field129, Field131: p.Field131,
	}
}

// NewThriftMessage returns the Thrift mirror of benchpb.New(), for the codec
// benchmarks.
func NewThriftMessage() *thriftbench.BenchmarkMessage { return newThriftMessage() }

func newThriftBatch() []*thriftbench.LogEntry {
	b := make([]*thriftbench.LogEntry, LogBatchSize)
	for i := range b {
		b[i] = &thriftbench.LogEntry{Hostname: LogHostname, Message: LogLine}
	}
	return b
}
