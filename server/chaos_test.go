package server_test

import (
	"context"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/compress"
	"github.com/fleetrpc/fleet/protocol"
	"github.com/fleetrpc/fleet/server"
)

// fuzzFrame returns one random, mostly malformed or hostile, frame (or
// plain garbage) for the raw-frame chaos test.
func fuzzFrame(r *rand.Rand, bombs [][]byte) []byte {
	switch r.IntN(10) {
	case 0: // garbage
		b := make([]byte, r.IntN(64))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	case 1: // a length prefix that lies
		b := binary.BigEndian.AppendUint32(nil, r.Uint32())
		return append(b, 0xF1, 0xEE, 1, 1)
	case 2: // a truncated request
		f := request(r.Uint64(), 0, 0, "A", "Echo", nil, []byte("cut"))
		return f[:r.IntN(len(f))]
	}
	h := protocol.Header{
		Type:        protocol.Type(1 + r.IntN(6)),
		Flags:       protocol.Flags(r.IntN(4)),
		Codec:       byte(r.IntN(6)),
		Compression: byte(r.IntN(5)),
		Status:      byte(r.IntN(20)),
		Seq:         r.Uint64(),
		Timeout:     uint32(r.IntN(3)) * 1000,
	}
	svc, method := "A", "Echo"
	if r.IntN(4) == 0 {
		svc, method = "Nope", "X"
	}
	var md fleet.Metadata
	if r.IntN(3) == 0 {
		md = fleet.Metadata{"k": "v", fleet.AuthKey: "x"}
	}
	payload := bombs[r.IntN(len(bombs))]
	if r.IntN(2) == 0 {
		payload = make([]byte, r.IntN(4096))
		for i := range payload {
			payload[i] = byte(r.Uint32())
		}
	}
	out, err := protocol.AppendFrame(nil, &h, svc, method, md, payload, 0)
	if err != nil {
		return []byte{0}
	}
	if r.IntN(8) == 0 && len(out) > protocol.HeaderSize { // flip a byte
		out[protocol.PrefixSize+r.IntN(len(out)-protocol.PrefixSize)] ^= byte(1 + r.IntN(255))
	}
	return out
}

// TestRawFrameChaos: eight peers send random hostile frames (garbage,
// lying lengths, truncations, random types, flags, codecs, compressions,
// bombs, byte flips) at a live server for a few seconds, reconnecting
// whenever it closes them. A well-behaved client keeps getting answers, the
// server does not panic, its heap stays bounded, and (TestMain's leak
// check) no goroutine outlives the test.
func TestRawFrameChaos(t *testing.T) {
	srv, addr := echoServer(t,
		server.WithLimits(protocol.Limits{MaxDecompressedSize: 1 << 20}),
		server.WithMaxPendingBytes(16<<20),
		server.WithFrameReadTimeout(500*time.Millisecond))
	_ = srv
	bombs := [][]byte{zstdStream(t, 1<<20), zstdStream(t, 8<<20), gzipOf(t, 1<<20)}
	if b, err := (compress.SnappyCompressor{}).Compress(nil, make([]byte, 1<<20)); err == nil {
		bombs = append(bombs, b)
	}
	base := heapInuse()
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var frames atomic.Int64
	for p := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(p), 42))
			for {
				select {
				case <-stop:
					return
				default:
				}
				nc, err := net.Dial("tcp", addr)
				if err != nil {
					t.Errorf("dial: %v", err)
					return
				}
				go io.Copy(io.Discard, nc) // drain answers until closed
				for range 1 + r.IntN(50) {
					nc.SetWriteDeadline(time.Now().Add(2 * time.Second))
					if _, err := nc.Write(fuzzFrame(r, bombs)); err != nil {
						break
					}
					frames.Add(1)
				}
				nc.Close()
			}
		}()
	}
	good := dial(t, addr)
	end := time.Now().Add(3 * time.Second)
	calls := 0
	for time.Now().Before(end) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		var out []byte
		err := good.Call(ctx, "A", "Echo", []byte("ok"), &out)
		cancel()
		if err != nil || string(out) != "ok" {
			t.Fatalf("good client, call %d: %v", calls, err)
		}
		calls++
		if calls%50 == 0 {
			if h := heapInuse(); h > peak.Load() {
				peak.Store(h)
			}
		}
	}
	close(stop)
	wg.Wait()
	grew := int64(peak.Load()) - int64(base)
	t.Logf("%d hostile frames, %d good calls, heap grew by %.1f MiB at most", frames.Load(), calls, float64(grew)/(1<<20))
	if grew > 128<<20 {
		t.Fatalf("heap in use grew by %d MiB under the chaos, want <= 128 MiB", grew>>20)
	}
}
