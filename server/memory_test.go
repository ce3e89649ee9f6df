package server_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/compress"
	"github.com/fleetrpc/fleet/internal/bufpool"
	"github.com/fleetrpc/fleet/internal/testutil"
	"github.com/fleetrpc/fleet/protocol"
	"github.com/fleetrpc/fleet/server"
	"github.com/klauspost/compress/zstd"
)

// hostileConn is a test peer speaking raw frames.
type hostileConn struct {
	t  testing.TB
	nc net.Conn
	r  *protocol.Reader
}

func dialHostile(t testing.TB, addr string) *hostileConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &hostileConn{t: t, nc: nc, r: protocol.NewReader(nc, 0, protocol.Limits{MaxFrameSize: 16 << 20})}
}

// request builds a request frame.
func request(seq uint64, flags protocol.Flags, comp compress.ID, service, method string, md fleet.Metadata, payload []byte) []byte {
	h := protocol.Header{Type: protocol.TypeRequest, Flags: flags, Codec: byte(codec.Raw), Compression: byte(comp), Seq: seq}
	if comp != compress.None {
		h.Flags |= protocol.FlagCompressed
	}
	out, err := protocol.AppendFrame(nil, &h, service, method, md, payload, 0)
	if err != nil {
		panic(err)
	}
	return out
}

// zstdStream compresses n zero bytes as a zstd stream, whose frame does
// not declare its content size.
func zstdStream(t testing.TB, n int) []byte {
	t.Helper()
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

func gzipOf(t testing.TB, n int) []byte {
	t.Helper()
	out, err := compress.GzipCompressor{}.Compress(nil, make([]byte, n))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// heapInuse returns the heap in use after a garbage collection.
func heapInuse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// The kinds of bomb, encoded in the request's sequence number (seq % 4).
const (
	bombZstdFits  = iota // zstd without content size, 1 MiB: runs
	bombZstdOver         // zstd without content size, 8 MiB: ResourceExhausted
	bombGzipFits         // gzip, 1 MiB: runs
	bombGzipLying        // gzip whose trailer claims 100 bytes: ResourceExhausted
)

// TestCompressionBombsStayWithinBudget floods the server with compressed
// bombs from raw connections (one, then eight) while a well-behaved client
// calls on its own connection. The server counts what each request may
// decompress to against its budgets (8 MiB server-wide here), so its heap
// stays bounded; bombs over the decompression limit fail with
// ResourceExhausted, the others run, and the good client gets every answer.
func TestCompressionBombsStayWithinBudget(t *testing.T) {
	const limit = 1 << 20
	zFits, zOver := zstdStream(t, limit), zstdStream(t, 8*limit)
	gFits := gzipOf(t, limit)
	gLying := gzipOf(t, limit)
	binary.LittleEndian.PutUint32(gLying[len(gLying)-4:], 100)
	payloads := [4][]byte{bombZstdFits: zFits, bombZstdOver: zOver, bombGzipFits: gFits, bombGzipLying: gLying}
	comps := [4]compress.ID{bombZstdFits: compress.Zstd, bombZstdOver: compress.Zstd, bombGzipFits: compress.Gzip, bombGzipLying: compress.Gzip}

	for _, conns := range []int{1, 8} {
		t.Run("conns="+string(rune('0'+conns)), func(t *testing.T) {
			var ran atomic.Int64
			srv := server.New(
				server.WithLimits(protocol.Limits{MaxDecompressedSize: limit}),
				server.WithMaxPendingBytesPerConn(4<<20),
				server.WithMaxPendingBytes(8<<20),
			)
			srv.RegisterFunction("Bomb", "Take", func(ctx context.Context, in *[]byte, _ *[]byte) error {
				if len(*in) != limit {
					return fleet.Errorf(fleet.InvalidArgument, "got %d bytes", len(*in))
				}
				ran.Add(1)
				time.Sleep(2 * time.Millisecond)
				return nil
			})
			srv.RegisterFunction("Bomb", "Echo", func(ctx context.Context, in *[]byte, out *[]byte) error {
				*out = *in
				return nil
			})
			addr := testutil.Serve(t, srv)
			base := heapInuse()

			// Sample the heap while the flood runs.
			var peak atomic.Uint64
			stopSampling := make(chan struct{})
			sampled := make(chan struct{})
			go func() {
				defer close(sampled)
				for {
					if h := heapInuse(); h > peak.Load() {
						peak.Store(h)
					}
					select {
					case <-stopSampling:
						return
					case <-time.After(10 * time.Millisecond):
					}
				}
			}()

			const perConn = 48 // 12 of each kind
			var codes [4]map[fleet.Code]int
			for i := range codes {
				codes[i] = map[fleet.Code]int{}
			}
			var mu sync.Mutex
			var wg sync.WaitGroup
			for range conns {
				rc := dialHostile(t, addr)
				wg.Add(2)
				go func() { // writer
					defer wg.Done()
					for i := range perConn {
						k := i % 4
						if _, err := rc.nc.Write(request(uint64(i), 0, comps[k], "Bomb", "Take", nil, payloads[k])); err != nil {
							t.Errorf("write bomb: %v", err)
							return
						}
					}
				}()
				go func() { // reader
					defer wg.Done()
					rc.nc.SetReadDeadline(time.Now().Add(25 * time.Second))
					for range perConn {
						f, buf, err := rc.r.ReadFrame()
						if err != nil {
							t.Errorf("read response: %v", err)
							return
						}
						mu.Lock()
						codes[f.Seq%4][fleet.Code(f.Status)]++
						mu.Unlock()
						bufpool.Put(buf)
					}
				}()
			}
			// A well-behaved client on its own connection gets answers.
			good := dial(t, addr)
			for i := range 20 {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				var out []byte
				err := good.Call(ctx, "Bomb", "Echo", []byte{byte(i)}, &out)
				cancel()
				if err != nil || len(out) != 1 || out[0] != byte(i) {
					t.Fatalf("good client call %d: %v (%v)", i, err, out)
				}
			}
			wg.Wait()
			close(stopSampling)
			<-sampled

			n := conns * perConn / 4
			for k, want := range [4]fleet.Code{bombZstdFits: fleet.OK, bombZstdOver: fleet.ResourceExhausted, bombGzipFits: fleet.OK, bombGzipLying: fleet.ResourceExhausted} {
				if codes[k][want] != n {
					t.Errorf("bomb kind %d: codes %v, want %d x %v", k, codes[k], n, want)
				}
			}
			if ran.Load() != int64(n*2) {
				t.Errorf("%d bombs ran, want %d", ran.Load(), n*2)
			}
			// 8 MiB budget; pooled buffers (sync.Pool keeps them across a
			// collection), read buffers and the test's own frames add to
			// it: 10-60 MiB measured under -race on a busy machine.
			// Without the accounting this flood reaches 350 MiB and more,
			// so the bound leaves room for noise and still catches that.
			grew := int64(peak.Load()) - int64(base)
			t.Logf("%d conns: heap in use grew by %.1f MiB at most (base %.1f MiB)", conns, float64(grew)/(1<<20), float64(base)/(1<<20))
			if grew > 128<<20 {
				t.Fatalf("heap in use grew by %d MiB under the bomb flood, want <= 128 MiB", grew>>20)
			}
		})
	}
}

// TestLargeFramesFromManyConnsStayWithinBudget: 32 connections each send
// one 2 MiB request while handlers hold the 8 MiB server budget. A frame
// that is not in memory yet is read only once its size fits in the budget,
// so the waiting connections do not hold 2 MiB each; once the handlers are
// released every request runs.
func TestLargeFramesFromManyConnsStayWithinBudget(t *testing.T) {
	t.Run("default timeouts", func(t *testing.T) { largeFrames(t) })
	t.Run("no timeouts", func(t *testing.T) {
		largeFrames(t, server.WithFrameReadTimeout(0), server.WithIdleTimeout(0))
	})
}

func largeFrames(t *testing.T, opts ...server.Option) {
	release := make(chan struct{})
	var running, handled atomic.Int64
	srv := server.New(append(opts, server.WithMaxPendingBytes(8<<20))...)
	srv.RegisterFunction("Big", "Take", func(ctx context.Context, in *[]byte, _ *[]byte) error {
		running.Add(1)
		<-release
		handled.Add(1)
		return nil
	})
	addr := testutil.Serve(t, srv)
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	const conns = 32
	// One frame, built before the baseline and written by every
	// connection (each has its own sequence space): the test's own
	// buffers then do not count in the heap's growth, whatever the
	// kernel's socket buffers hold.
	frame := request(1, protocol.FlagOneway, 0, "Big", "Take", nil, make([]byte, 2<<20))
	base := heapInuse()
	var wg sync.WaitGroup
	for range conns {
		rc := dialHostile(t, addr)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rc.nc.Write(frame)
		}()
	}
	deadline := time.Now().Add(20 * time.Second)
	for running.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if running.Load() < 3 {
		t.Fatalf("%d handlers running, want the budget's worth (3 or 4)", running.Load())
	}
	var peak uint64
	for range 20 {
		peak = max(peak, heapInuse())
		time.Sleep(10 * time.Millisecond)
	}
	grew := int64(peak) - int64(base)
	t.Logf("%d handlers hold the budget; heap grew by %.1f MiB at most", running.Load(), float64(grew)/(1<<20))
	if running.Load() > 4 {
		t.Fatalf("%d handlers of 2 MiB requests ran under an 8 MiB budget", running.Load())
	}
	if grew > 40<<20 {
		t.Fatalf("heap in use grew by %d MiB with 32 x 2 MiB frames waiting, want <= 40 MiB", grew>>20)
	}
	close(release)
	released = true
	wg.Wait()
	for handled.Load() < conns && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if handled.Load() != conns {
		t.Fatalf("%d of %d requests ran", handled.Load(), conns)
	}
}
