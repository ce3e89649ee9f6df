package server_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/compress"
	"github.com/fleetrpc/fleet/internal/bufpool"
	"github.com/fleetrpc/fleet/internal/testutil"
	"github.com/fleetrpc/fleet/protocol"
	"github.com/fleetrpc/fleet/server"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// The default per-connection budget (WithMaxPendingBytesPerConn) and
// decompression limit (protocol.Limits) the flood tests are measured
// against.
const (
	defaultConnBudget = 64 << 20
	defaultMaxDecomp  = protocol.DefaultMaxDecompressedSize
)

// heapMeter samples the heap while a flood runs, with runtime/metrics:
// /memory/classes/heap/objects:bytes (live objects and dead ones not yet
// swept, without forcing a collection) for the peak, and
// /gc/heap/allocs:bytes for what was allocated in all.
type heapMeter struct {
	baseObjects, baseAllocs uint64
	peak                    atomic.Uint64
	stop, done              chan struct{}
}

func readHeap() (objects, allocs uint64) {
	s := [2]metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s[:])
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

// startHeapMeter collects garbage, takes the baseline and samples every
// millisecond until stopped.
func startHeapMeter() *heapMeter {
	runtime.GC()
	m := &heapMeter{stop: make(chan struct{}), done: make(chan struct{})}
	m.baseObjects, m.baseAllocs = readHeap()
	go func() {
		defer close(m.done)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			if o, _ := readHeap(); o > m.peak.Load() {
				m.peak.Store(o)
			}
			select {
			case <-m.stop:
				return
			case <-t.C:
			}
		}
	}()
	return m
}

// finish stops sampling and returns the peak rise of the heap's objects
// over the baseline and the bytes allocated since the baseline.
func (m *heapMeter) finish() (rise int64, allocated uint64) {
	close(m.stop)
	<-m.done
	_, allocs := readHeap()
	return int64(m.peak.Load()) - int64(m.baseObjects), allocs - m.baseAllocs
}

// zstdNoSizeBomb builds a zstd frame of wire bytes that declares no
// content size: a 1 MiB window and RLE blocks of 128 KiB each (RFC 8878,
// 3.1.1.2), so that 32 KiB expand to 1 GiB.
func zstdNoSizeBomb(wire int) []byte {
	b := []byte{0x28, 0xB5, 0x2F, 0xFD, // magic
		0x00,    // descriptor: no content size, no checksum, no dictionary
		10 << 3} // window descriptor: 2^(10+10) = 1 MiB
	const rle, block = 1, 128 << 10
	n := (wire - len(b)) / 4
	for i := range n {
		h := uint32(block<<3 | rle<<1)
		if i == n-1 {
			h |= 1 // last block
		}
		b = append(b, byte(h), byte(h>>8), byte(h>>16), 'x')
	}
	return b
}

// gzipLyingBomb builds a gzip stream of about wire bytes that expands to
// far more than the decompression limit while its trailer (ISIZE) claims
// exactly the limit.
func gzipLyingBomb(t testing.TB, wire int) []byte {
	t.Helper()
	out := gzipOf(t, wire*1000) // deflate's best ratio is about 1:1032
	binary.LittleEndian.PutUint32(out[len(out)-4:], defaultMaxDecomp)
	return out
}

// flood writes frames on n raw connections (all of one connection's
// frames in one write) and returns the status codes of the responses.
func flood(t *testing.T, addr string, conns int, frames []byte, perConn int) map[fleet.Code]int {
	t.Helper()
	codes := map[fleet.Code]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range conns {
		rc := dialHostile(t, addr)
		wg.Add(2)
		go func() {
			defer wg.Done()
			if _, err := rc.nc.Write(frames); err != nil {
				t.Errorf("write flood: %v", err)
			}
		}()
		go func() {
			defer wg.Done()
			rc.nc.SetReadDeadline(time.Now().Add(60 * time.Second))
			for range perConn {
				f, buf, err := rc.r.ReadFrame()
				if err != nil {
					t.Errorf("read response: %v", err)
					return
				}
				mu.Lock()
				codes[fleet.Code(f.Status)]++
				mu.Unlock()
				bufpool.Put(buf)
			}
		}()
	}
	wg.Wait()
	return codes
}

// TestCompressedFloodMemory floods a server with default options with
// compressed bombs over loopback and measures its heap with
// runtime/metrics:
//   - 256 zstd frames that declare no content size (32 KiB each on the
//     wire, 1 GiB each decompressed), written at once on one connection:
//     each is refused with ResourceExhausted, the heap rises by at most
//     twice the per-connection budget, and at most 256 MiB is allocated
//     in all while refusing them;
//   - 8 connections with 32 gzip bombs each (32 KiB on the wire, about
//     32 MiB decompressed, the trailer claiming exactly the limit): each
//     is refused, the heap rises by at most twice the per-connection
//     budget.
//
// The test's own frames are built before the baseline.
func TestCompressedFloodMemory(t *testing.T) {
	cases := []struct {
		name        string
		conns, each int
		comp        compress.ID
		payload     func() []byte
		maxAlloc    uint64 // 0: not checked
	}{
		{"zstd no size 1x256", 1, 256, compress.Zstd, func() []byte { return zstdNoSizeBomb(32 << 10) }, 256 << 20},
		{"gzip 8x32", 8, 32, compress.Gzip, func() []byte { return gzipLyingBomb(t, 32<<10) }, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			payload := tc.payload()
			if n := decodedSize(t, tc.comp, payload); n <= 4*defaultMaxDecomp {
				t.Fatalf("bomb decodes to %d bytes, want far more than %d", n, defaultMaxDecomp)
			}
			var ran atomic.Int64
			srv := server.New()
			srv.RegisterFunction("Bomb", "Take", func(_ context.Context, in *[]byte, _ *[]byte) error {
				ran.Add(1)
				return nil
			})
			addr := testutil.Serve(t, srv)
			var frames []byte
			for i := range tc.each {
				frames = append(frames, request(uint64(i+1), 0, tc.comp, "Bomb", "Take", nil, payload)...)
			}
			meter := startHeapMeter()
			codes := flood(t, addr, tc.conns, frames, tc.each)
			rise, allocated := meter.finish()
			t.Logf("%d conns x %d frames of %d bytes: heap objects rose by %.1f MiB at most; %.1f MiB allocated; codes %v",
				tc.conns, tc.each, len(payload), float64(rise)/(1<<20), float64(allocated)/(1<<20), codes)
			if codes[fleet.ResourceExhausted] != tc.conns*tc.each {
				t.Errorf("codes %v, want %d x ResourceExhausted", codes, tc.conns*tc.each)
			}
			if ran.Load() != 0 {
				t.Errorf("the handler ran %d times", ran.Load())
			}
			if rise > 2*defaultConnBudget {
				t.Errorf("heap rose by %d MiB, want at most %d MiB (twice the per-connection budget)", rise>>20, 2*defaultConnBudget>>20)
			}
			if tc.maxAlloc > 0 && allocated > tc.maxAlloc {
				t.Errorf("%d MiB allocated while refusing the flood, want at most %d MiB", allocated>>20, tc.maxAlloc>>20)
			}
		})
	}
}

// decodedSize decompresses src with a streaming decoder and counts its
// output, up to 64 MiB. A gzip bomb's false trailer fails the stream only
// at its end, after the count.
func decodedSize(t *testing.T, id compress.ID, src []byte) int64 {
	var r io.Reader
	switch id {
	case compress.Zstd:
		d, err := zstd.NewReader(bytes.NewReader(src), zstd.WithDecoderConcurrency(1))
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		r = d
	case compress.Gzip:
		g, err := gzip.NewReader(bytes.NewReader(src))
		if err != nil {
			t.Fatal(err)
		}
		r = g
	}
	n, _ := io.Copy(io.Discard, io.LimitReader(r, 64<<20))
	return n
}
