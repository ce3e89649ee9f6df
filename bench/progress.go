package bench

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// progress prints one status line on stderr while the benchmark runs: on a
// terminal it is rewritten in place four times a second, otherwise one line
// is printed per measurement.
type progress struct {
	w     io.Writer
	tty   bool
	start time.Time

	mu      sync.Mutex
	label   string
	total   int64
	count   *atomic.Int64
	begun   time.Time
	stopped chan struct{}
	wg      sync.WaitGroup
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w, start: time.Now()}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

// note sets a status line with no counter.
func (p *progress) note(label string) {
	if p == nil || p.w == nil {
		return
	}
	p.begin(label, 0, nil)
	p.end()
}

// begin starts a measurement's status line; count, if not nil, is polled
// for the number of calls so far, out of total (0 = unknown).
func (p *progress) begin(label string, total int64, count *atomic.Int64) {
	if p == nil || p.w == nil {
		return
	}
	p.mu.Lock()
	p.label, p.total, p.count, p.begun = label, total, count, time.Now()
	p.mu.Unlock()
	if !p.tty {
		fmt.Fprintf(p.w, "[%6.1fs] %s\n", time.Since(p.start).Seconds(), label)
		return
	}
	p.print()
	p.stopped = make(chan struct{})
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				p.print()
			case <-p.stopped:
				return
			}
		}
	}()
}

func (p *progress) print() {
	p.mu.Lock()
	defer p.mu.Unlock()
	line := fmt.Sprintf("[%6.1fs] %s", time.Since(p.start).Seconds(), p.label)
	if p.count != nil {
		n := p.count.Load()
		if p.total > 0 {
			n = min(n, p.total)
			line += fmt.Sprintf(": %d/%d calls", n, p.total)
		} else {
			line += fmt.Sprintf(": %d calls", n)
		}
		line += fmt.Sprintf(", %.1fs", time.Since(p.begun).Seconds())
	}
	fmt.Fprintf(p.w, "\r\x1b[K%s", line)
}

// end finishes the current status line.
func (p *progress) end() {
	if p == nil || p.w == nil || !p.tty {
		return
	}
	close(p.stopped)
	p.wg.Wait()
	p.print()
}

// done clears the status line at the end of the run.
func (p *progress) done() {
	if p == nil || p.w == nil {
		return
	}
	if p.tty {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
	fmt.Fprintf(p.w, "[%6.1fs] done\n", time.Since(p.start).Seconds())
}

// clear erases the status line so that other output can be printed.
func (p *progress) clear() {
	if p != nil && p.w != nil && p.tty {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
}
