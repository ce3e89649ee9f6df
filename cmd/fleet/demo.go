package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/internal/benchpb"
	"github.com/fleetrpc/fleet/internal/demo"
	"github.com/fleetrpc/fleet/server"
	"github.com/spf13/cobra"
)

type demoFlags struct {
	calls, callers int
	json           bool
}

func init() {
	var f demoFlags
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Serve Arith and Hello on loopback and drive them with concurrent callers",
		Long: `demo starts a Fleet server on 127.0.0.1 with the services Arith (Add, Mul,
Div; net/rpc form) and Hello.Say (the 581-byte BenchmarkMessage), checks the
Arith methods, then makes --calls calls of Hello.Say from --callers concurrent
callers, checks every reply, and prints calls, errors, calls/s and latency.
The exit status is 1 if any call failed.`,
		RunE: func(cmd *cobra.Command, args []string) error { return runDemo(cmd.Context(), f, os.Stdout, os.Stderr) },
	}
	cmd.Flags().IntVarP(&f.calls, "calls", "n", 100_000, "number of Hello.Say calls")
	cmd.Flags().IntVarP(&f.callers, "callers", "c", 100, "concurrent callers")
	cmd.Flags().BoolVar(&f.json, "json", false, "print the result as one JSON object")
	rootCmd.AddCommand(cmd)
}

func runDemo(ctx context.Context, f demoFlags, stdout, stderr io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	srv := server.New()
	if err := srv.Register(demo.Arith{}); err != nil {
		return err
	}
	hello := &demo.Hello{}
	if err := srv.Register(hello); err != nil {
		return err
	}
	lis, err := srv.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go srv.Serve(lis)
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	c, err := client.Dial(ctx, "tcp", lis.Addr().String())
	if err != nil {
		return err
	}
	defer c.Close()

	if err := checkArith(ctx, c.Call); err != nil {
		return err
	}
	args := benchpb.New()
	res := demo.Run(ctx, f.calls, f.callers, func(ctx context.Context) error {
		var reply benchpb.BenchmarkMessage
		if err := c.Call(ctx, "Hello", "Say", args, &reply); err != nil {
			return err
		}
		return demo.CheckReply(args, &reply)
	}, progress(stderr, f.calls, f.json))
	return report(stdout, res, f.json, lis.Addr().String())
}

type callFunc func(ctx context.Context, service, method string, args, reply any) error

// checkArith calls Arith's three methods and checks their answers,
// including Div's divide-by-zero error.
func checkArith(ctx context.Context, call callFunc) error {
	var sum, prod, quo int
	if err := call(ctx, "Arith", "Add", &demo.Args{A: 7, B: 8}, &sum); err != nil || sum != 15 {
		return fmt.Errorf("Arith.Add(7, 8) = %d, %v", sum, err)
	}
	if err := call(ctx, "Arith", "Mul", &demo.Args{A: 7, B: 8}, &prod); err != nil || prod != 56 {
		return fmt.Errorf("Arith.Mul(7, 8) = %d, %v", prod, err)
	}
	if err := call(ctx, "Arith", "Div", &demo.Args{A: 56, B: 8}, &quo); err != nil || quo != 7 {
		return fmt.Errorf("Arith.Div(56, 8) = %d, %v", quo, err)
	}
	err := call(ctx, "Arith", "Div", &demo.Args{A: 1, B: 0}, &quo)
	var fe *fleet.Error
	if !errors.As(err, &fe) || fe.Message != demo.ErrDivideByZero.Error() {
		return fmt.Errorf("Arith.Div(1, 0) = %v, want the divide-by-zero error", err)
	}
	return nil
}

// progress returns a progress reporter writing a line to w about every
// tenth of the run, or nil when quiet.
func progress(w io.Writer, total int, quiet bool) func(int64) {
	if quiet || total < 10 {
		return nil
	}
	step := int64(total / 10)
	return func(done int64) {
		if done%step == 0 {
			fmt.Fprintf(w, "\r%3d%% (%d/%d calls)", done*100/int64(total), done, total)
			if done == int64(total) {
				fmt.Fprintln(w)
			}
		}
	}
}

var errCallsFailed = errors.New("some calls failed")

func report(w io.Writer, res demo.Result, asJSON bool, where string) error {
	if asJSON {
		enc := json.NewEncoder(w)
		if err := enc.Encode(res); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(w, "server:       %s\n", where)
		fmt.Fprintf(w, "calls:        %d\n", res.Calls)
		fmt.Fprintf(w, "errors:       %d\n", res.Errors)
		if res.FirstError != "" {
			fmt.Fprintf(w, "first error:  %s\n", res.FirstError)
		}
		fmt.Fprintf(w, "elapsed:      %v\n", res.Elapsed.Round(time.Millisecond))
		fmt.Fprintf(w, "calls/s:      %.0f\n", res.CallsPerSecond)
		fmt.Fprintf(w, "latency (ms): mean %.3f  p50 %.3f  p99 %.3f  max %.3f\n", res.Latency.Mean, res.Latency.P50, res.Latency.P99, res.Latency.Max)
		for addr, n := range res.PerServer {
			fmt.Fprintf(w, "  %-22s %d calls\n", addr, n)
		}
	}
	if res.Errors > 0 {
		return errCallsFailed
	}
	return nil
}
