package bench

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fleetrpc/fleet/server"
)

// OverloadCommand is the child subcommand that serves the overload
// scenario's Work.Do (see overloadMain), the first argument of ChildMain.
const OverloadCommand = "bench-overload"

// overloadMain serves Work.Do in a child process, as the other scenarios'
// servers run, so that the handlers' wake-ups do not queue behind the load
// generator's goroutines on the same Go scheduler. Flags: --adaptive
// serves with server.WithAdaptiveLimit (defaults). Protocol: it prints
// "addr HOST:PORT"; then "sample on" starts sampling the adaptive limit
// every millisecond and "sample off" stops it; "stats" is answered with
// "stats BUSY_NS HOLDS RUNNING LIMIT_SUM SAMPLES LIMIT" (slot time held,
// slot holds, handlers running, the sum and count of the sampled limits,
// the current limit). It shuts down when stdin closes, and exits by itself
// after --max-time.
func overloadMain(args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet(OverloadCommand, flag.ContinueOnError)
	adaptive := fs.Bool("adaptive", false, "serve with the adaptive concurrency limit")
	maxTime := fs.Duration("max-time", 30*time.Minute, "hard time limit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var opts []server.Option
	if *adaptive {
		opts = append(opts, server.WithAdaptiveLimit(server.AdaptiveLimit{}))
	}
	s, err := startOverloadServer(opts...)
	if err != nil {
		return err
	}
	defer s.close()
	hard := time.AfterFunc(*maxTime, func() {
		fmt.Fprintf(os.Stderr, "%s: hard time limit %v reached\n", OverloadCommand, *maxTime)
		os.Exit(3)
	})
	defer hard.Stop()

	w := bufio.NewWriter(stdout)
	fmt.Fprintf(w, "addr %s\n", s.addr)
	w.Flush()
	var mu sync.Mutex
	var sum float64
	var n int64
	var stop, sampled chan struct{}
	sampleOff := func() {
		if stop != nil {
			close(stop)
			<-sampled
			stop = nil
		}
	}
	defer sampleOff()
	sc := bufio.NewScanner(stdin)
	for sc.Scan() {
		switch strings.TrimSpace(sc.Text()) {
		case "sample on":
			if stop != nil {
				continue
			}
			stop, sampled = make(chan struct{}), make(chan struct{})
			go func(stop <-chan struct{}, done chan<- struct{}) {
				defer close(done)
				tick := time.NewTicker(time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						return
					case <-tick.C:
						l, _, _ := s.srv.AdaptiveLimitState()
						mu.Lock()
						sum += float64(l)
						n++
						mu.Unlock()
					}
				}
			}(stop, sampled)
		case "sample off":
			sampleOff()
		case "stats":
			limit, _, _ := s.srv.AdaptiveLimitState()
			mu.Lock()
			fmt.Fprintf(w, "stats %d %d %d %s %d %d\n", s.busy.Load(), s.holds.Load(), s.running.Load(),
				strconv.FormatFloat(sum, 'g', -1, 64), n, limit)
			mu.Unlock()
			w.Flush()
		case "":
		default:
			fmt.Fprintf(w, "error unknown command %q\n", sc.Text())
			w.Flush()
		}
	}
	return nil
}

// overloadProc is the overload scenario's server in a child process.
type overloadProc struct {
	*child
	addr string
}

// overloadStats is a child's answer to "stats".
type overloadStats struct {
	busy     time.Duration // slot time held, all slots together
	holds    int64
	running  int64
	limitSum float64
	samples  int64
	limit    int
}

func startOverloadProc(launch Launcher, test string, adaptive bool, maxTime time.Duration) (*overloadProc, error) {
	args := []string{OverloadCommand, "--max-time", maxTime.String()}
	if adaptive {
		args = append(args, "--adaptive")
	}
	c, addr, err := startListener(launch, OverloadCommand+" ("+test+")", args...)
	if err != nil {
		return nil, err
	}
	return &overloadProc{child: c, addr: addr}, nil
}

func (p *overloadProc) stats() (overloadStats, error) {
	var st overloadStats
	if err := p.send("stats"); err != nil {
		return st, p.failure("stats: " + err.Error())
	}
	line, err := p.readLine(10 * time.Second)
	if err != nil {
		return st, err
	}
	var busy int64
	if _, err := fmt.Sscanf(line, "stats %d %d %d %g %d %d", &busy, &st.holds, &st.running, &st.limitSum, &st.samples, &st.limit); err != nil {
		return st, p.failure("bad stats line " + strconv.Quote(line))
	}
	st.busy = time.Duration(busy)
	return st, nil
}

func (p *overloadProc) sample(on bool) error {
	cmd := "sample off"
	if on {
		cmd = "sample on"
	}
	if err := p.send(cmd); err != nil {
		return p.failure(cmd + ": " + err.Error())
	}
	return nil
}
