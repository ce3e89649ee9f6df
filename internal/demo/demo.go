package demo

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetrpc/fleet/internal/benchpb"
)

// Args are Arith's arguments.
type Args struct{ A, B int }

// Arith is written in net/rpc form, as a net/rpc service would be.
type Arith struct{}

// Add sets *reply to A+B.
func (Arith) Add(args *Args, reply *int) error { *reply = args.A + args.B; return nil }

// Mul sets *reply to A*B.
func (Arith) Mul(args *Args, reply *int) error { *reply = args.A * args.B; return nil }

// ErrDivideByZero is Div's error for B == 0.
var ErrDivideByZero = errors.New("divide by zero")

// Div sets *reply to A/B, failing with ErrDivideByZero's message for B == 0.
func (Arith) Div(args *Args, reply *int) error {
	if args.B == 0 {
		return ErrDivideByZero
	}
	*reply = args.A / args.B
	return nil
}

// Hello is the benchmark service of ../shared/benchmark.proto.
type Hello struct {
	// Served counts the calls this instance answered.
	Served atomic.Int64
}

// Say returns the message with field1 = "OK" and field2 = 100.
func (h *Hello) Say(ctx context.Context, args *benchpb.BenchmarkMessage, reply *benchpb.BenchmarkMessage) error {
	h.Served.Add(1)
	benchpb.Echo(reply, args)
	return nil
}

// CheckReply reports whether reply is what Hello.Say returns for args.
func CheckReply(args, reply *benchpb.BenchmarkMessage) error {
	if reply.GetField1() != "OK" || reply.GetField2() != 100 {
		return fmt.Errorf("reply has field1=%q field2=%d", reply.GetField1(), reply.GetField2())
	}
	if reply.GetField3() != args.GetField3() || reply.GetField9() != args.GetField9() || reply.GetField12() != args.GetField12() {
		return errors.New("reply does not echo the request's fields")
	}
	return nil
}

// Result is a load run's outcome; its JSON form is what `fleet demo --json`
// prints.
type Result struct {
	Calls          int64            `json:"calls"`
	Errors         int64            `json:"errors"`
	CallsPerSecond float64          `json:"calls_per_second"`
	Latency        Latency          `json:"latency_ms"`
	PerServer      map[string]int64 `json:"per_server,omitempty"`
	Elapsed        time.Duration    `json:"-"`
	FirstError     string           `json:"first_error,omitempty"`
}

// Latency holds latency figures in milliseconds.
type Latency struct {
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
}

// Run makes n calls of call from c concurrent callers and measures them.
// onProgress, if not nil, is called with the number of calls done so far
// after each call (from the callers' goroutines; keep it cheap).
func Run(ctx context.Context, n, c int, call func(ctx context.Context) error, onProgress func(done int64)) Result {
	if c < 1 {
		c = 1
	}
	lat := make([]time.Duration, n)
	var next, errs atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < c; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) || ctx.Err() != nil {
					return
				}
				t0 := time.Now()
				err := call(ctx)
				lat[i] = time.Since(t0)
				if err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
				if onProgress != nil {
					onProgress(i + 1)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	done := min(next.Load(), int64(n))
	lat = lat[:done]
	r := Result{Calls: done, Errors: errs.Load(), Elapsed: elapsed}
	if s, ok := firstErr.Load().(string); ok {
		r.FirstError = s
	}
	if elapsed > 0 {
		r.CallsPerSecond = float64(done) / elapsed.Seconds()
	}
	r.Latency = Summarize(lat)
	return r
}

// Summarize computes mean, p50, p99 and max of the durations (sorting them).
func Summarize(lat []time.Duration) Latency {
	if len(lat) == 0 {
		return Latency{}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	return Latency{Mean: ms(sum / time.Duration(len(lat))), P50: ms(pct(0.50)), P99: ms(pct(0.99)), Max: ms(lat[len(lat)-1])}
}
