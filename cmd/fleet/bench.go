package main

import (
	"context"
	"os"
	"os/signal"
	"strings"
	"syscall"

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
	)
	cmd := &cobra.Command{
		Use:   "bench [echo|math|latency|logs|codecs|all]...",
		Short: "Compare Fleet with gRPC-go, Thrift, net/rpc and a raw TCP ceiling",
		Long: `bench reproduces the brief's benchmark studies with Fleet and its peers in
the same run on this machine, and prints one table per scenario:

  echo     the 581-byte BenchmarkMessage, 100-5000 callers over 1 and 10 connections
  math     MathService.Add: long connection, short connections, 4 client processes
  latency  handlers sleeping 0, 10 and 1000 ms, compared with Little's law
  logs     log batches shipped acknowledged, oneway and oneway+zstd
  codecs   marshal and unmarshal of the BenchmarkMessage by every codec

Servers (and the 4 math client processes) run as separate processes of this
binary. Every measurement is capped in time. A full run writes
docs/benchmarks.md, docs/benchmarks.json and charts in docs/img/; --quick runs
everything in under a minute and writes nothing unless --out is given.`,
		ValidArgs: append(append([]string{}, bench.Scenarios...), "all"),
		RunE: func(cmd *cobra.Command, args []string) error {
			mode := bench.Full
			if quick {
				mode = bench.Quick
			}
			if !cmd.Flags().Changed("out") && quick {
				out = ""
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
	f.StringSliceVar(&peerList, "peers", nil, "peers to measure (default all): "+strings.Join(peers.Names(), ","))
	f.StringVar(&render, "render", "", "measure nothing: print the tables of an earlier run's JSON results (and rewrite --out and its charts from them)")
	f.IntVar(&senders, "log-senders", 4, "goroutines shipping log batches over the one connection of the logs scenario")
	rootCmd.AddCommand(cmd)

	for _, name := range []string{bench.ServerCommand, bench.ClientCommand} {
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
