package compress

import (
	"errors"
	"runtime"
	"sync"
	"testing"
)

// TestMeasureConcurrency: 32 goroutines measuring zstd bombs with the
// largest window a frame without a content size may declare (8 MiB, so
// each decoder's history is about 8.3 MiB) run at most GOMAXPROCS
// measurements at once, so they hold at most that many histories, and
// every bomb is refused with ErrTooLarge.
func TestMeasureConcurrency(t *testing.T) {
	// A frame without a content size, an 8 MiB window (2^(10+13)) and
	// 64 RLE blocks of 128 KiB: 8 MiB out, over the 1 MiB limit.
	bomb := []byte{0x28, 0xB5, 0x2F, 0xFD, 0x00, 13 << 3}
	for i := range 64 {
		h := uint32(128<<10)<<3 | 1<<1
		if i == 63 {
			h |= 1
		}
		bomb = append(bomb, byte(h), byte(h>>8), byte(h>>16), 'x')
	}
	measuringPeak.Store(0)
	var wg sync.WaitGroup
	errs := make(chan error, 32*2)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 2 {
				_, err := ZstdCompressor{}.DecompressBound(bomb, 1<<20)
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, ErrTooLarge) {
			t.Fatalf("bomb: %v, want ErrTooLarge", err)
		}
	}
	if p, max := measuringPeak.Load(), int32(runtime.GOMAXPROCS(0)); p < 1 || p > max {
		t.Fatalf("%d measurements ran at once, want 1 to GOMAXPROCS (%d)", p, max)
	}
	if n := measuring.Load(); n != 0 {
		t.Fatalf("%d measurements still counted as running", n)
	}
}
