package main

import (
	"context"
	"encoding/json"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetrpc/fleet/bench"
	"github.com/fleetrpc/fleet/bench/peers"
)

func init() {
	var (
		quick    bool
		jsonOut  bool
		out      string
		peerList []string
		senders  int
		render   string
		repeat   int
	)
	cmd := &cobra.Command{
		Use:   "bench [echo|math|latency|logs|codecs|streams|overload|all]...",
		Short: "Compare Fleet with rpcx, gRPC-go, Thrift, net/rpc and a raw TCP ceiling",
		Long: `bench measures Fleet and its peers (rpcx, gRPC-go, Thrift, net/rpc, JSON-RPC,
raw TCP and gob-stream ceilings) in the same run on this machine, with the same
handler, message and load driver for every peer, and prints one table per
scenario:

  echo     throughput and latency percentiles of echoing the 581-byte
           BenchmarkMessage, 100-5000 concurrent callers over 1 and 10 connections
  math     MathService.Add calls/s: serial calls on one long connection, short
           connections (connect, call, close), 4 client processes at once
  latency  calls/s when handlers sleep 0, 10 and 1000 ms, against the limit
           Little's law gives (callers / sleep)
  logs     log entries/s shipped in batches: acknowledged, oneway, oneway+zstd
  codecs   ns to marshal and unmarshal the BenchmarkMessage with every codec
  streams  messages/s of a server stream and a bidirectional echo stream of the
           BenchmarkMessage (Fleet and gRPC-go), and Fleet unary calls while a
           stream saturates the same connection
  overload (only when named) open-loop load at twice a Fleet server's measured
           capacity, without and with server.WithAdaptiveLimit: goodput vs
           peak throughput, admitted calls' p99 vs the uncongested p99, shed
           share (each row's server a child process, as in the other
           scenarios; the rows taking turns in rounds;
           about 45 s, --quick: about 6 s; run alone it writes no report
           unless --out is given)

--repeat N runs the echo scenario N rounds (peers interleaved) and reports
the median round and the spread (max - min) / median of each figure.

Servers (and the 4 math client processes) run as separate processes of this
binary. Every measurement is capped in time. A full run writes
docs/benchmarks.md, docs/benchmarks.json and charts in docs/img/; --quick runs
everything in under a minute and writes nothing unless --out is given.`,
		ValidArgs: append(append(append([]string{}, bench.Scenarios...), bench.OptionalScenarios...), "all"),
		RunE: func(cmd *cobra.Command, args []string) error {
			mode := bench.Full
			if quick {
				mode = bench.Quick
			}
			if !cmd.Flags().Changed("out") && (quick || onlyOptional(args)) {
				out = "" // a partial run must not replace the published report
			}
			if render != "" {
				if !cmd.Flags().Changed("out") {
					out = ""
				}
				_, err := bench.Render(render, out, os.Stdout)
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			_, err := bench.Run(ctx, bench.Options{
				Scenarios:  args,
				Peers:      peerList,
				Mode:       mode,
				LogSenders: senders,
				Repeat:     repeat,
				Out:        out,
				JSON:       jsonOut,
				Command:    "go run ./cmd/fleet " + quoteArgs(os.Args[1:]),
			})
			return err
		},
	}
	f := cmd.Flags()
	f.BoolVar(&quick, "quick", false, "run every scenario and peer in under 60 s (fewer calls, fewer concurrency levels)")
	f.BoolVar(&jsonOut, "json", false, "print the results as JSON on stdout instead of the tables")
	f.StringVar(&out, "out", "docs/benchmarks.md", "markdown report to write, with charts in img/ beside it and the JSON results (default with --quick: none)")
	f.StringSliceVar(&peerList, "peers", nil, "peers to measure: "+strings.Join(peers.Names(), ",")+" (default: all but the variants "+strings.Join(variants(), ",")+": other set-ups of Fleet (typed Handle, value receiver, metrics and tracing on, behind the gateway), measured only when named)")
	f.StringVar(&render, "render", "", "measure nothing: print the tables of an earlier run's JSON results (and rewrite --out and its charts from them)")
	f.IntVar(&repeat, "repeat", 1, "run the echo scenario this many rounds and report the median and the spread of each figure")
	f.IntVar(&senders, "log-senders", 4, "goroutines shipping log batches over the one connection of the logs scenario")
	cmd.AddCommand(soakCommand(), governanceCommand())
	rootCmd.AddCommand(cmd)

	for _, name := range []string{bench.ServerCommand, bench.ClientCommand, bench.OverloadCommand} {
		rootCmd.AddCommand(&cobra.Command{
			Use:                name,
			Short:              "internal: a child process of fleet bench",
			Hidden:             true,
			DisableFlagParsing: true,
			RunE: func(cmd *cobra.Command, args []string) error {
				return bench.ChildMain(append([]string{cmd.Name()}, args...), os.Stdin, os.Stdout)
			},
		})
	}
}

// soakCommand is "fleet bench soak".
func soakCommand() *cobra.Command {
	var opts bench.SoakOptions
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "soak",
		Short: "Run mixed load for a while and report the growth of RSS, heap, goroutines and fds",
		Long: `soak runs two Fleet servers and their clients in this process under mixed
load for --duration: calls through an XClient, calls that fail, oneway sends,
one call per fresh connection (reconnects) and registry churn (a server leaves
and rejoins a static registry every 2 s). Every --interval it samples RSS,
the live heap (after a GC), goroutines and open fds, and at the end it prints
each one's least-squares slope over the second half of the run, which should
be about zero, and the figures before and after (load stopped, everything
closed).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if !jsonOut {
				opts.Progress = cmd.OutOrStdout()
			}
			res, err := bench.Soak(ctx, opts)
			if err != nil && ctx.Err() == nil {
				return err
			}
			if jsonOut {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(res)
			}
			bench.WriteSoak(cmd.OutOrStdout(), res)
			return nil
		},
	}
	f := cmd.Flags()
	f.DurationVar(&opts.Duration, "duration", time.Minute, "how long the load runs")
	f.DurationVar(&opts.Interval, "interval", time.Second, "sampling period")
	f.IntVar(&opts.Callers, "callers", 8, "goroutines making successful calls (plus 2 failing, 2 oneway, 1 reconnecting)")
	f.DurationVar(&opts.Pause, "pause", time.Millisecond, "each load goroutine's pause between calls")
	f.BoolVar(&jsonOut, "json", false, "print the result with every sample as JSON instead of the text report")
	return cmd
}

// quoteArgs renders args for a shell.
func quoteArgs(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$*?[]{}()<>|&;#~`") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		q[i] = a
	}
	return strings.Join(q, " ")
}

// onlyOptional reports whether args name only scenarios that all does not
// run (bench.OptionalScenarios).
func onlyOptional(args []string) bool {
	if len(args) == 0 {
		return false
	}
	for _, a := range args {
		if !slices.Contains(bench.OptionalScenarios, a) {
			return false
		}
	}
	return true
}

// variants names the peers measured only when asked for.
func variants() []string {
	var out []string
	for _, p := range peers.All() {
		if p.Variant {
			out = append(out, p.Name)
		}
	}
	return out
}
