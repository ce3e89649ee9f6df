package gateway_test

// The server side of the route conformance suite (conformance_test.go):
// the service every route calls, a per-cell server behind a gateway, raw
// native frames for payloads a well-behaved client never sends, and the
// heap sampler.

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/compress"
	"github.com/fleetrpc/fleet/gateway"
	"github.com/fleetrpc/fleet/internal/benchpb"
	"github.com/fleetrpc/fleet/internal/bufpool"
	"github.com/fleetrpc/fleet/protocol"
	"github.com/fleetrpc/fleet/server"
	"github.com/klauspost/compress/zstd"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
)

// confToken is the only token the conformance server's auth accepts.
const confToken = "s3cret"

// Handler behaviours, chosen by the request's field1.
const (
	modeEcho  = ""      // answer at once
	modeWait  = "wait"  // wait for the call's context to end
	modePanic = "panic" // panic
	modeBlock = "block" // hold a slot until the cell releases it
)

// confService is the service behind every route: unary Conf.Echo and
// Conf.Many, server stream Conf.List, client stream Conf.Sum, bidi stream
// Conf.Chat. ran counts handlers that got a decoded request (for client
// and bidi streams: their first message); done counts handlers that
// returned after getting one.
type confService struct {
	ran, done atomic.Int64
	waiting   chan struct{} // a modeWait handler is waiting
	blocked   chan struct{} // a modeBlock handler holds its slot
	release   chan struct{} // closed: modeBlock handlers return
	relOnce   sync.Once
}

func newConfService() *confService {
	return &confService{
		waiting: make(chan struct{}, 64),
		blocked: make(chan struct{}, 64),
		release: make(chan struct{}),
	}
}

func (s *confService) unblock() { s.relOnce.Do(func() { close(s.release) }) }

// behave runs the mode in in.Field1 once a handler has its request.
func (s *confService) behave(ctx context.Context, in *msg) error {
	switch in.GetField1() {
	case modeWait:
		s.waiting <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	case modePanic:
		panic("conformance: handler panic")
	case modeBlock:
		s.blocked <- struct{}{}
		select {
		case <-s.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Item is the element of Conf.Many's argument.
type Item struct{ A int }

func (s *confService) register(t *testing.T, srv *server.Server) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(server.Handle(srv, "Conf", "Echo", func(ctx context.Context, in *msg, out *msg) error {
		s.ran.Add(1)
		defer s.done.Add(1)
		if err := s.behave(ctx, in); err != nil {
			return err
		}
		proto.Merge(out, in)
		return nil
	}))
	must(server.Handle(srv, "Conf", "Many", func(ctx context.Context, in *[]Item, out *int) error {
		s.ran.Add(1)
		defer s.done.Add(1)
		*out = len(*in)
		return nil
	}))
	must(server.HandleServerStream(srv, "Conf", "List", func(ctx context.Context, in *msg, st *server.ServerStream[msg]) error {
		s.ran.Add(1)
		defer s.done.Add(1)
		if err := s.behave(ctx, in); err != nil {
			return err
		}
		return st.Send(in)
	}))
	must(server.HandleClientStream(srv, "Conf", "Sum", func(ctx context.Context, st *server.ClientStream[msg]) (*msg, error) {
		var last *msg
		for st.Receive() {
			if last == nil {
				s.ran.Add(1)
				defer s.done.Add(1)
			}
			last = st.Msg()
			if err := s.behave(ctx, last); err != nil {
				return nil, err
			}
		}
		if err := st.Err(); err != nil {
			return nil, err
		}
		if last == nil {
			return nil, fleet.NewError(fleet.InvalidArgument, "no message")
		}
		return last, nil
	}))
	must(server.HandleBidiStream(srv, "Conf", "Chat", func(ctx context.Context, st *server.BidiStream[msg, msg]) error {
		first := true
		for {
			in, err := st.Receive()
			if err != nil {
				if err == io.EOF {
					return nil
				}
				return err
			}
			if first {
				first = false
				s.ran.Add(1)
				defer s.done.Add(1)
			}
			if err := s.behave(ctx, in); err != nil {
				return err
			}
			if err := st.Send(in); err != nil {
				return err
			}
		}
	}))
}

// confEnv is one cell's server: a Fleet server with auth and the case's
// options, behind a gateway on 127.0.0.1, and the clients the route made.
type confEnv struct {
	t    *testing.T
	svc  *confService
	srv  *server.Server
	gw   *gateway.Gateway
	addr string
	done chan error

	mu        sync.Mutex
	natives   map[string]*client.Client // by token
	cc        *grpc.ClientConn
	hc        *http.Client
	h2        *http.Client   // cleartext HTTP/2 (prior knowledge), for Connect's client and bidi streams
	inProcess bool           // native clients and raw frames go in-process (client.InProcess, srv.ServeConn)
	shutErr   chan error     // the case's own Shutdown, when it started one
	bg        sync.WaitGroup // calls the case's setup started
}

func newConfEnv(t *testing.T, opts []server.Option, gwOpts ...gateway.Option) *confEnv {
	t.Helper()
	auth := server.WithAuth(func(ctx context.Context, info *fleet.CallInfo, token string) error {
		if token != confToken {
			return errors.New("conformance: bad token")
		}
		return nil
	})
	srv := server.New(append([]server.Option{server.WithLogger(discard()), auth}, opts...)...)
	e := &confEnv{t: t, svc: newConfService(), srv: srv, natives: map[string]*client.Client{}}
	e.svc.register(t, srv)
	e.gw = gateway.New(srv, append([]gateway.Option{gateway.WithLogger(discard())}, gwOpts...)...)
	e.addr, e.done = listenServe(t, e.gw)
	return e
}

// close releases blocked handlers, closes the clients and stops the
// server, waiting for Serve to return.
func (e *confEnv) close() {
	e.svc.unblock()
	e.bg.Wait()
	e.mu.Lock()
	for _, c := range e.natives {
		c.Close()
	}
	if e.cc != nil {
		e.cc.Close()
	}
	if e.hc != nil {
		e.hc.Transport.(*http.Transport).CloseIdleConnections()
	}
	if e.h2 != nil {
		e.h2.Transport.(*http.Transport).CloseIdleConnections()
	}
	e.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if e.shutErr != nil {
		if err := <-e.shutErr; err != nil {
			e.t.Errorf("the case's Shutdown: %v", err)
		}
	} else if err := e.gw.Shutdown(ctx); err != nil {
		e.t.Errorf("Shutdown: %v", err)
	}
	if err := <-e.done; !errors.Is(err, gateway.ErrClosed) {
		e.t.Errorf("Serve returned %v", err)
	}
}

// native returns the cell's native client sending token ("" for none),
// dialing it on first use.
func (e *confEnv) native(token string, opts ...client.Option) *client.Client {
	e.mu.Lock()
	defer e.mu.Unlock()
	key := token
	if len(opts) > 0 {
		key += "+opts" // a client of its own (compression, limits)
	}
	if c := e.natives[key]; c != nil {
		return c
	}
	if token != "" {
		opts = append(opts, client.WithAuthToken(token))
	}
	var c *client.Client
	var err error
	if e.inProcess {
		c, err = client.InProcess(e.srv, opts...)
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err = client.Dial(ctx, "tcp", e.addr, opts...)
	}
	if err != nil {
		e.t.Fatalf("dial: %v", err)
	}
	e.natives[key] = c
	return c
}

// grpcConn returns the cell's gRPC client connection.
func (e *confEnv) grpcConn() *grpc.ClientConn {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cc == nil {
		cc, err := grpc.NewClient(e.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			e.t.Fatal(err)
		}
		e.cc = cc
	}
	return e.cc
}

// http returns the cell's HTTP/1.1 client.
func (e *confEnv) http() *http.Client {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.hc == nil {
		e.hc = &http.Client{Transport: &http.Transport{}, Timeout: 20 * time.Second}
	}
	return e.hc
}

// h2c returns the cell's cleartext HTTP/2 client (prior knowledge).
func (e *confEnv) h2c() *http.Client {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.h2 == nil {
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		e.h2 = &http.Client{Transport: &http.Transport{Protocols: &p}, Timeout: 20 * time.Second}
	}
	return e.h2
}

// startShutdown starts srv.Shutdown and returns once the server refuses
// new calls; close waits for it.
func (e *confEnv) startShutdown() {
	e.shutErr = make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		e.shutErr <- e.srv.Shutdown(ctx)
	}()
	waitFor(e.t, "Shutdown to begin", e.srv.ShuttingDown)
}

// rawCall sends one request frame on a new connection and returns the
// code of its response, or "connection closed" when the server closed the
// connection instead of answering.
func (e *confEnv) rawCall(ctx context.Context, token string, cd codec.ID, comp compress.ID, service, method string, payload []byte) string {
	var nc net.Conn
	if e.inProcess {
		var sc net.Conn
		nc, sc = net.Pipe()
		go e.srv.ServeConn(sc)
	} else {
		var err error
		if nc, err = net.Dial("tcp", e.addr); err != nil {
			e.t.Fatal(err)
		}
	}
	defer nc.Close()
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Now()) })
	defer stop()
	var md fleet.Metadata
	if token != "" {
		md = fleet.Metadata{fleet.AuthKey: token}
	}
	h := protocol.Header{Type: protocol.TypeRequest, Codec: byte(cd), Compression: byte(comp), Seq: 1}
	if comp != compress.None {
		h.Flags |= protocol.FlagCompressed
	}
	frame, err := protocol.AppendFrame(nil, &h, service, method, md, payload, 64<<20)
	if err != nil {
		e.t.Fatal(err)
	}
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	// Write and read at once: a server may answer (or close) before it
	// read the whole frame.
	go nc.Write(frame)
	r := protocol.NewReader(nc, 0, protocol.Limits{MaxFrameSize: 64 << 20})
	for {
		f, buf, err := r.ReadFrame()
		if err != nil {
			return "connection closed"
		}
		typ, seq, st := f.Type, f.Seq, f.Status
		bufpool.Put(buf)
		if typ == protocol.TypeResponse && seq == 1 {
			return fleet.Code(st).String()
		}
	}
}

// zstdNoSize compresses n zero bytes as a zstd stream, whose frame does not
// declare its content size.
func zstdNoSize(t *testing.T, n int) []byte {
	var b bytes.Buffer
	w, err := zstd.NewWriter(&b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(make([]byte, n)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func gzipZeros(t *testing.T, n int) []byte {
	out, err := compress.GzipCompressor{}.Compress(nil, make([]byte, n))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// bigMsg returns a valid request message whose encoding is about n bytes.
func bigMsg(n int) *msg {
	m := benchpb.New()
	m.Field1 = proto.String(string(bytes.Repeat([]byte{'a'}, n)))
	return m
}

// heapObjects is the runtime's count of bytes in heap objects, live or
// not yet swept (runtime/metrics).
func heapObjects(s []metrics.Sample) uint64 {
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// heapGOGC is the collector's GOGC while a cell's call runs: lower than
// the default 100 so that the sampled peak follows what the server holds
// rather than garbage waiting for the next cycle (at 100 a cycle may wait
// until the heap doubles).
const heapGOGC = 25

// heapPeak samples the heap while run runs and returns how far it rose
// above its level, after a collection, before run.
func heapPeak(run func()) (grew int64) {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	defer debug.SetGCPercent(debug.SetGCPercent(heapGOGC))
	runtime.GC()
	base := heapObjects(s)
	var peak atomic.Uint64
	peak.Store(base)
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			if h := heapObjects(s); h > peak.Load() {
				peak.Store(h)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	run()
	close(stop)
	<-stopped
	if h := heapObjects(s); h > peak.Load() {
		peak.Store(h)
	}
	return int64(peak.Load()) - int64(base)
}
