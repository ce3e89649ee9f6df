package peers

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"

	"google.golang.org/protobuf/proto"

	"github.com/fleetrpc/fleet/internal/benchpb"
)

// The raw peer: the ceiling for this machine. It carries the same 581 bytes
// as the echo of every RPC peer (the protobuf encoding of benchpb.New(),
// encoded once) in length-prefixed frames over TCP with no RPC layer: no
// codec, no service dispatch, no goroutine per request. A frame is a 4-byte
// big-endian payload length, a 4-byte request id and the payload. The
// server echoes each frame on the connection it came from, flushing when its
// input buffer runs dry; the client pipelines: callers append frames to a
// per-connection buffer that one writer goroutine sends in one write, and
// one reader goroutine per connection hands replies back by id.

func init() {
	Register(&Peer{
		Name:      Raw,
		Title:     "raw TCP echo",
		Desc:      "length-prefixed frames over TCP echoed by the server, pipelined, one writer and one reader goroutine per connection, no RPC layer: the ceiling",
		Ops:       []Op{OpEcho},
		NewServer: func(ServerOptions) (Server, error) { return &rawServer{}, nil },
		Dial:      dialRaw,
	})
}

const rawHeader = 8

// rawMaxFrame bounds the payload the raw peer accepts.
const rawMaxFrame = 1 << 20

type rawServer struct {
	counter
	tcpServer
}

func (s *rawServer) Serve(lis net.Listener) error {
	return s.serve(lis, func(c net.Conn) {
		br := bufio.NewReaderSize(c, 64<<10)
		bw := bufio.NewWriterSize(c, 64<<10)
		buf := make([]byte, rawHeader+4096)
		for {
			if _, err := io.ReadFull(br, buf[:rawHeader]); err != nil {
				return
			}
			n := int(binary.BigEndian.Uint32(buf))
			if n > rawMaxFrame {
				return
			}
			if cap(buf) < rawHeader+n {
				buf = append(buf[:rawHeader], make([]byte, n)...)
			}
			frame := buf[:rawHeader+n]
			if _, err := io.ReadFull(br, frame[rawHeader:]); err != nil {
				return
			}
			if _, err := bw.Write(frame); err != nil {
				return
			}
			if br.Buffered() == 0 {
				if err := bw.Flush(); err != nil {
					return
				}
			}
		}
	})
}

var errRawClosed = errors.New("raw: connection closed")

type rawConn struct {
	conn net.Conn
	want []byte // the payload every reply must equal

	wmu   sync.Mutex
	wbuf  []byte
	spare []byte
	wake  chan struct{}

	pmu     sync.Mutex
	pending map[uint32]chan error
	err     error

	nextID atomic.Uint32
	done   chan struct{}
}

type rawClient struct {
	rr      roundRobin
	conns   []*rawConn
	payload []byte
	chans   sync.Pool
}

func dialRaw(ctx context.Context, addr string, o ClientOptions) (Client, error) {
	payload, err := proto.Marshal(benchpb.New())
	if err != nil {
		return nil, err
	}
	c := &rawClient{payload: payload}
	c.chans.New = func() any { return make(chan error, 1) }
	var d net.Dialer
	for range conns(o) {
		nc, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			c.Close()
			return nil, err
		}
		rc := &rawConn{
			conn:    nc,
			want:    payload,
			wake:    make(chan struct{}, 1),
			pending: make(map[uint32]chan error),
			done:    make(chan struct{}),
		}
		go rc.writeLoop()
		go rc.readLoop()
		c.conns = append(c.conns, rc)
	}
	return c, nil
}

func (rc *rawConn) writeLoop() {
	for {
		select {
		case <-rc.wake:
		case <-rc.done:
			return
		}
		for {
			rc.wmu.Lock()
			out := rc.wbuf
			rc.wbuf, rc.spare = rc.spare[:0], nil
			rc.wmu.Unlock()
			if len(out) == 0 {
				rc.wmu.Lock()
				rc.spare = out
				rc.wmu.Unlock()
				break
			}
			if _, err := rc.conn.Write(out); err != nil {
				rc.fail(err)
				return
			}
			rc.wmu.Lock()
			rc.spare = out[:0]
			rc.wmu.Unlock()
		}
	}
}

func (rc *rawConn) readLoop() {
	br := bufio.NewReaderSize(rc.conn, 64<<10)
	hdr := make([]byte, rawHeader)
	buf := make([]byte, 4096)
	for {
		if _, err := io.ReadFull(br, hdr); err != nil {
			rc.fail(err)
			return
		}
		n := int(binary.BigEndian.Uint32(hdr))
		id := binary.BigEndian.Uint32(hdr[4:])
		if n > rawMaxFrame {
			rc.fail(fmt.Errorf("raw: frame of %d bytes", n))
			return
		}
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		if _, err := io.ReadFull(br, buf[:n]); err != nil {
			rc.fail(err)
			return
		}
		rc.pmu.Lock()
		ch := rc.pending[id]
		delete(rc.pending, id)
		rc.pmu.Unlock()
		if ch == nil {
			continue // the caller gave up
		}
		if bytes.Equal(buf[:n], rc.want) {
			ch <- nil
		} else {
			ch <- fmt.Errorf("raw: echo of %d bytes differs from the %d sent", n, len(rc.want))
		}
	}
}

func (rc *rawConn) fail(err error) {
	rc.pmu.Lock()
	if rc.err == nil {
		rc.err = err
		close(rc.done)
	}
	pending := rc.pending
	rc.pending = map[uint32]chan error{}
	rc.pmu.Unlock()
	for _, ch := range pending {
		ch <- errRawClosed
	}
	rc.conn.Close()
}

func (c *rawClient) Echo(ctx context.Context) error {
	rc := c.conns[c.rr.pick(len(c.conns))]
	ch := c.chans.Get().(chan error)
	id := rc.nextID.Add(1)
	rc.pmu.Lock()
	if rc.err != nil {
		rc.pmu.Unlock()
		c.chans.Put(ch)
		return rc.err
	}
	rc.pending[id] = ch
	rc.pmu.Unlock()

	rc.wmu.Lock()
	wasEmpty := len(rc.wbuf) == 0
	rc.wbuf = binary.BigEndian.AppendUint32(rc.wbuf, uint32(len(c.payload)))
	rc.wbuf = binary.BigEndian.AppendUint32(rc.wbuf, id)
	rc.wbuf = append(rc.wbuf, c.payload...)
	rc.wmu.Unlock()
	if wasEmpty {
		select {
		case rc.wake <- struct{}{}:
		default:
		}
	}

	select {
	case err := <-ch:
		c.chans.Put(ch)
		return err
	case <-ctx.Done():
		rc.pmu.Lock()
		delete(rc.pending, id)
		rc.pmu.Unlock()
		return ctx.Err() // ch may still be written to: not reused
	}
}

func (c *rawClient) Add(context.Context, int32, int32) (int32, error) { return 0, ErrUnsupported }
func (c *rawClient) Log(context.Context) error                        { return ErrUnsupported }
func (c *rawClient) LogOneway(context.Context) error                  { return ErrUnsupported }

func (c *rawClient) Close() error {
	for _, rc := range c.conns {
		rc.fail(errRawClosed)
	}
	return nil
}
