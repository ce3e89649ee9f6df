package compress_test

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"google.golang.org/protobuf/proto"

	"github.com/fleetrpc/fleet/compress"
	"github.com/fleetrpc/fleet/internal/benchpb"
)

var all = []struct {
	id compress.ID
	c  compress.Compressor
}{
	{compress.Gzip, compress.GzipCompressor{}},
	{compress.Snappy, compress.SnappyCompressor{}},
	{compress.Zstd, compress.ZstdCompressor{}},
}

func TestRegistered(t *testing.T) {
	names := map[compress.ID]string{compress.Gzip: "gzip", compress.Snappy: "snappy", compress.Zstd: "zstd"}
	for id, name := range names {
		c := compress.Get(id)
		if c == nil || c.Name() != name {
			t.Errorf("Get(%d) = %v, want %s", id, c, name)
		}
	}
	if c := compress.Get(compress.None); c != nil {
		t.Errorf("Get(None) = %v, want nil", c)
	}
}

// text returns n bytes of word salad: compressible like real text.
func text(n int) []byte {
	words := strings.Fields("the quick brown fox jumps over the lazy dog fleet rpc " +
		"server client codec frame payload 许多往事在眼前一幕一幕 变的那麼模糊 lorem ipsum dolor sit amet")
	r := rand.New(rand.NewPCG(1, 2))
	var b bytes.Buffer
	for b.Len() < n {
		b.WriteString(words[r.IntN(len(words))])
		b.WriteByte(' ')
	}
	return b.Bytes()[:n]
}

func random(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(3, 4))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func protoPayload(t testing.TB) []byte {
	b, err := proto.Marshal(benchpb.New())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRoundTrip(t *testing.T) {
	inputs := []struct {
		name string
		data []byte
	}{
		{"empty", []byte{}},
		{"one byte", []byte{'x'}},
		{"proto 581", protoPayload(t)},
		{"text 64KiB", text(64 << 10)},
		{"random 100KiB", random(100 << 10)},
		{"zeros 1MiB", make([]byte, 1<<20)},
		{"text 3MiB", text(3 << 20)},
	}
	for _, a := range all {
		for _, in := range inputs {
			t.Run(a.c.Name()+"/"+in.name, func(t *testing.T) {
				prefix := []byte("hdr")
				comp, err := a.c.Compress(bytes.Clone(prefix), in.data)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.HasPrefix(comp, prefix) {
					t.Fatal("Compress lost dst")
				}
				comp = comp[len(prefix):]

				// Exactly at the limit succeeds, and keeps dst.
				out, err := a.c.Decompress([]byte("out"), comp, len(in.data))
				if err != nil {
					t.Fatalf("Decompress at limit: %v", err)
				}
				if string(out[:3]) != "out" || !bytes.Equal(out[3:], in.data) {
					t.Fatalf("round trip mismatch: got %d bytes, want %d", len(out)-3, len(in.data))
				}
				// Into a nil dst.
				out, err = a.c.Decompress(nil, comp, len(in.data)+1000)
				if err != nil || !bytes.Equal(out, in.data) {
					t.Fatalf("Decompress into nil: %v", err)
				}
				// One byte under the limit fails.
				if len(in.data) > 0 {
					dst := []byte("dst")
					out, err = a.c.Decompress(dst, comp, len(in.data)-1)
					if !errors.Is(err, compress.ErrTooLarge) {
						t.Fatalf("Decompress with limit %d: err = %v, want ErrTooLarge", len(in.data)-1, err)
					}
					if string(out) != "dst" {
						t.Fatalf("Decompress on error returned %q, want dst", out)
					}
				}
			})
		}
	}
}

// TestInterop checks that each format is the standard one: what we
// compress, a reference decoder reads, and the other way round.
func TestInterop(t *testing.T) {
	data := text(200 << 10)

	t.Run("gzip", func(t *testing.T) {
		comp, _ := compress.GzipCompressor{}.Compress(nil, data)
		r, err := gzip.NewReader(bytes.NewReader(comp))
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if _, err := got.ReadFrom(r); err != nil || !bytes.Equal(got.Bytes(), data) {
			t.Fatalf("compress/gzip reading our output: %v", err)
		}
		// Two members written by compress/gzip, concatenated.
		var std bytes.Buffer
		for _, part := range [][]byte{data[:1000], data[1000:]} {
			w := gzip.NewWriter(&std)
			w.Write(part)
			w.Close()
		}
		out, err := compress.GzipCompressor{}.Decompress(nil, std.Bytes(), len(data))
		if err != nil || !bytes.Equal(out, data) {
			t.Fatalf("Decompress of compress/gzip members: %v", err)
		}
	})

	t.Run("snappy", func(t *testing.T) {
		comp, _ := compress.SnappyCompressor{}.Compress(nil, data)
		got, err := snappy.DecodeStrict(nil, comp)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("strict Snappy decoder reading our output: %v", err)
		}
		out, err := compress.SnappyCompressor{}.Decompress(nil, snappy.Encode(nil, data), len(data))
		if err != nil || !bytes.Equal(out, data) {
			t.Fatalf("Decompress of snappy.Encode output: %v", err)
		}
	})

	t.Run("zstd", func(t *testing.T) {
		// A streamed frame declares no content size, and two frames
		// concatenated must both be decoded.
		var streamed bytes.Buffer
		w, _ := zstd.NewWriter(&streamed, zstd.WithEncoderConcurrency(1))
		w.Write(data)
		w.Close()
		var h zstd.Header
		if err := h.Decode(streamed.Bytes()); err != nil || h.HasFCS {
			t.Fatalf("streamed frame: HasFCS = %v, err = %v; the test needs no content size", h.HasFCS, err)
		}
		out, err := compress.ZstdCompressor{}.Decompress(nil, streamed.Bytes(), len(data))
		if err != nil || !bytes.Equal(out, data) {
			t.Fatalf("Decompress of a streamed frame: %v", err)
		}
		if _, err := (compress.ZstdCompressor{}).Decompress(nil, streamed.Bytes(), len(data)-1); !errors.Is(err, compress.ErrTooLarge) {
			t.Fatalf("streamed frame over the limit: err = %v, want ErrTooLarge", err)
		}
		two, _ := compress.ZstdCompressor{}.Compress(nil, data[:5000])
		two = append(two, streamed.Bytes()...)
		want := append(bytes.Clone(data[:5000]), data...)
		out, err = compress.ZstdCompressor{}.Decompress(nil, two, len(want))
		if err != nil || !bytes.Equal(out, want) {
			t.Fatalf("Decompress of two frames: %v", err)
		}
		if _, err := (compress.ZstdCompressor{}).Decompress(nil, two, len(want)-1); !errors.Is(err, compress.ErrTooLarge) {
			t.Fatalf("two frames over the limit: err = %v, want ErrTooLarge", err)
		}

		ours, _ := compress.ZstdCompressor{}.Compress(nil, data)
		d, _ := zstd.NewReader(nil)
		defer d.Close()
		got, err := d.DecodeAll(ours, nil)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("default zstd decoder reading our output: %v", err)
		}
	})
}

func TestCorrupt(t *testing.T) {
	data := text(10 << 10)
	for _, a := range all {
		comp, _ := a.c.Compress(nil, data)
		flipped := bytes.Clone(comp)
		flipped[len(flipped)/2] ^= 0xff
		cases := map[string][]byte{
			"empty":     {},
			"garbage":   []byte("this is not compressed at all, not even a little"),
			"truncated": comp[:len(comp)/2],
			"flipped":   flipped,
		}
		for name, in := range cases {
			t.Run(a.c.Name()+"/"+name, func(t *testing.T) {
				out, err := a.c.Decompress([]byte("dst"), in, 1<<20)
				if err == nil {
					if name == "flipped" && a.c.Name() == "snappy" {
						t.Skip("the Snappy block format has no checksum: a flipped literal decodes")
					}
					t.Fatalf("no error (got %d bytes)", len(out))
				}
				if errors.Is(err, compress.ErrTooLarge) {
					t.Fatalf("corrupt input reported as too large: %v", err)
				}
				if string(out) != "dst" {
					t.Fatalf("on error returned %q, want dst", out)
				}
				if !strings.Contains(err.Error(), a.c.Name()) {
					t.Fatalf("error %q does not name the compressor", err)
				}
			})
		}
	}
}

// TestBomb checks that 100 MiB of zeros, compressed by each algorithm in
// every way an attacker might, fails under a 1 MiB limit without
// allocating much more than the limit.
func TestBomb(t *testing.T) {
	const (
		size   = 100 << 20
		limit  = 1 << 20
		budget = 8 << 20
	)
	zeros := make([]byte, size)
	type bomb struct {
		name string
		c    compress.Compressor
		data []byte
	}
	var bombs []bomb
	for _, a := range all {
		b, err := a.c.Compress(nil, zeros)
		if err != nil {
			t.Fatal(err)
		}
		bombs = append(bombs, bomb{a.c.Name(), a.c, b})
	}
	// A zstd frame that does not declare its size, as a stream encoder
	// writes it.
	var zs bytes.Buffer
	w, _ := zstd.NewWriter(&zs, zstd.WithEncoderConcurrency(1))
	w.Write(zeros)
	w.Close()
	bombs = append(bombs, bomb{"zstd/streamed", compress.ZstdCompressor{}, zs.Bytes()})
	// A gzip stream whose trailer understates its size.
	lying := bytes.Clone(bombs[0].data)
	copy(lying[len(lying)-4:], []byte{1, 0, 0, 0})
	bombs = append(bombs, bomb{"gzip/lying trailer", compress.GzipCompressor{}, lying})
	zeros = nil

	for _, b := range bombs {
		t.Run(b.name, func(t *testing.T) {
			// Warm the pools, so that only the call's own allocations count.
			b.c.Decompress(nil, b.data, 1)
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			out, err := b.c.Decompress(nil, b.data, limit)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, compress.ErrTooLarge) {
				t.Fatalf("err = %v, want ErrTooLarge (%d bytes out)", err, len(out))
			}
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("%d-byte bomb: allocated %d bytes, err: %v", len(b.data), alloc, err)
			if alloc > budget {
				t.Fatalf("allocated %d bytes, budget %d", alloc, budget)
			}
		})
	}
}

// TestSnappyLyingLength checks that a 10-byte block claiming 4 GiB is
// refused before allocation.
func TestSnappyLyingLength(t *testing.T) {
	src := []byte{0xff, 0xff, 0xff, 0xff, 0x0f, 0x00, 0x61}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := compress.SnappyCompressor{}.Decompress(nil, src, 1<<20)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, compress.ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
	if d := after.TotalAlloc - before.TotalAlloc; d > 64<<10 {
		t.Fatalf("allocated %d bytes", d)
	}
}

func TestNegativeLimit(t *testing.T) {
	for _, a := range all {
		comp, _ := a.c.Compress(nil, []byte("x"))
		if _, err := a.c.Decompress(nil, comp, -1); !errors.Is(err, compress.ErrTooLarge) {
			t.Errorf("%s: err = %v, want ErrTooLarge", a.c.Name(), err)
		}
		empty, _ := a.c.Compress(nil, nil)
		if out, err := a.c.Decompress(nil, empty, -1); err != nil || len(out) != 0 {
			t.Errorf("%s: empty payload with limit -1: %q, %v", a.c.Name(), out, err)
		}
	}
}

func TestConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 8 {
		for _, a := range all {
			wg.Go(func() {
				var comp, out []byte
				for i := range 30 {
					data := text(1000 + 997*(g+i))
					var err error
					if comp, err = a.c.Compress(comp[:0], data); err != nil {
						errs <- err
						return
					}
					if out, err = a.c.Decompress(out[:0], comp, len(data)); err != nil {
						errs <- err
						return
					}
					if !bytes.Equal(out, data) {
						errs <- fmt.Errorf("%s: mismatch", a.c.Name())
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
