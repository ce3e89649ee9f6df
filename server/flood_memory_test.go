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

// zstdNoSizeBomb builds a zstd frame of about wire bytes that declares
// no content size and decodes to far more than the decompression limit:
// the first two blocks the encoder makes of a repeated phrase (a 1 MiB
// window, no checksum), the second repeated until the frame has wire
// bytes. Each repeat is a 14-byte compressed block of one match 128 KiB
// long, so 32 KiB decode to about 290 MiB; compressed blocks, not RLE
// ones, so that decoding runs at the speed of real payloads, also under
// the race detector.
func zstdNoSizeBomb(t testing.TB, wire int) []byte {
	t.Helper()
	var b bytes.Buffer
	w, err := zstd.NewWriter(&b, zstd.WithWindowSize(1<<20), zstd.WithEncoderConcurrency(1), zstd.WithEncoderCRC(false))
	if err != nil {
		t.Fatal(err)
	}
	w.Write(bytes.Repeat([]byte("fleet bomb! "), 3*(128<<10)/12))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var h zstd.Header
	rest, err := h.DecodeAndStrip(b.Bytes())
	if err != nil || h.HasFCS || h.HasCheckSum {
		t.Fatalf("zstd stream header: %+v, %v", h, err)
	}
	out := bytes.Clone(b.Bytes()[:len(b.Bytes())-len(rest)])
	// Block header: 3 bytes little-endian, Last_Block in bit 0,
	// Block_Type in bits 1-2, Block_Size above (RFC 8878, 3.1.1.2).
	block := func(p []byte) []byte { return p[:3+int(uint32(p[0])|uint32(p[1])<<8|uint32(p[2])<<16)>>3] }
	first := block(rest)
	second := block(rest[len(first):])
	if first[0]>>1&3 != 2 || second[0]>>1&3 != 2 {
		t.Fatalf("encoder made blocks of types %d, %d, want compressed", first[0]>>1&3, second[0]>>1&3)
	}
	out = append(out, first...)
	for len(out)+len(second) <= wire {
		out = append(out, second...)
		out[len(out)-len(second)] &^= 1 // not last
	}
	out[len(out)-len(second)] |= 1 // the last block
	return out
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
		{"zstd no size 1x256", 1, 256, compress.Zstd, func() []byte { return zstdNoSizeBomb(t, 32<<10) }, 256 << 20},
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
// output, up to 20 MiB, failing the test if that much does not decode (a
// gzip bomb's false trailer would fail the stream only at its end).
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
	n, err := io.Copy(io.Discard, io.LimitReader(r, 5*defaultMaxDecomp))
	if err != nil {
		t.Fatalf("bomb does not decode: %v", err)
	}
	return n
}
