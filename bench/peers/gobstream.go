package peers

import (
	"bufio"
	"context"
	"encoding/gob"
	"net"
	"sync"
)

// The raw gob stream peer: seed 004's log shipper, with no RPC layer. Each
// connection carries one gob stream of []GobLogEntry batches: the client
// encodes a batch and flushes it in one write, the server decodes batches and
// counts entries. It only ships oneway.

func init() {
	Register(&Peer{
		Name:       GobStream,
		Title:      "raw gob stream",
		Desc:       "one encoding/gob stream of []LogEntry batches per TCP connection, no RPC layer (seed 004's shipper)",
		Ops:        []Op{OpLogOneway},
		OnewayDesc: "gob.Encoder.Encode + Flush per batch",
		NewServer:  func(ServerOptions) (Server, error) { return &gobStreamServer{}, nil },
		Dial:       dialGobStream,
	})
}

type gobStreamServer struct {
	counter
	tcpServer
}

func (s *gobStreamServer) Serve(lis net.Listener) error {
	return s.serve(lis, func(c net.Conn) {
		dec := gob.NewDecoder(bufio.NewReaderSize(c, 64<<10))
		var batch []GobLogEntry
		for {
			batch = batch[:0]
			if err := dec.Decode(&batch); err != nil {
				return
			}
			s.n.Add(int64(len(batch)))
		}
	})
}

type gobStreamConn struct {
	mu   sync.Mutex
	conn net.Conn
	bw   *bufio.Writer
	enc  *gob.Encoder
}

type gobStreamClient struct {
	rr    roundRobin
	conns []*gobStreamConn
	batch []GobLogEntry
}

func dialGobStream(ctx context.Context, addr string, o ClientOptions) (Client, error) {
	c := &gobStreamClient{batch: newGobBatch().Entries}
	var d net.Dialer
	for range conns(o) {
		nc, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			c.Close()
			return nil, err
		}
		bw := bufio.NewWriterSize(nc, 64<<10)
		c.conns = append(c.conns, &gobStreamConn{conn: nc, bw: bw, enc: gob.NewEncoder(bw)})
	}
	return c, nil
}

func (c *gobStreamClient) LogOneway(context.Context) error {
	g := c.conns[c.rr.pick(len(c.conns))]
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.enc.Encode(c.batch); err != nil {
		return err
	}
	return g.bw.Flush()
}

func (c *gobStreamClient) Echo(context.Context) error                       { return ErrUnsupported }
func (c *gobStreamClient) Add(context.Context, int32, int32) (int32, error) { return 0, ErrUnsupported }
func (c *gobStreamClient) Log(context.Context) error                        { return ErrUnsupported }

func (c *gobStreamClient) Close() error {
	for _, g := range c.conns {
		g.mu.Lock()
		g.bw.Flush()
		g.conn.Close()
		g.mu.Unlock()
	}
	return nil
}
