// Package bench is the `fleet bench` program: it reproduces the benchmark
// studies Fleet is measured by (rpcx-benchmark's echo, the gRPC-vs-Thrift
// MathService, the handler-latency study and the Gob-vs-Thrift log
// shipping, plus codec micro-benchmarks) with Fleet and its peers
// (bench/peers) measured in the same run on the same machine.
//
// Every server runs in a separate process: the running binary re-executes
// itself with the hidden `bench-server` subcommand (see ChildMain), which
// prints its address on stdout, answers "stats" lines on stdin with its CPU
// time and received log entries, and exits when stdin closes or after a hard
// time limit. The 4-process MathService test re-executes the binary as
// `bench-client` processes as well. The load generator runs in the parent;
// everything talks over 127.0.0.1.
//
// Every measurement is bounded: a fixed number of calls capped by a
// duration, or a fixed duration. Results are printed as markdown tables,
// optionally as JSON, and written with PNG charts (gonum.org/v1/plot) to
// docs/benchmarks.md by a full run.
//
// Usage, from the module root:
//
//	go run ./cmd/fleet bench --quick            # every scenario and peer, under a minute
//	go run ./cmd/fleet bench                    # the full run: writes docs/benchmarks.md, .json, img/
//	go run ./cmd/fleet bench echo logs --peers fleet,grpc,raw
//	go run ./cmd/fleet bench --quick --json > results.json
//	go run ./cmd/fleet bench --render docs/benchmarks.json --out docs/benchmarks.md
//
// The peers live in bench/peers; the Thrift code in
// bench/thriftbench is generated from bench/idl/bench.thrift
// and the protobuf messages of the math and log scenarios in
// bench/benchmsg from fleetbench.proto (the commands are in those
// files).
//
// It owns the harness, the scenarios and the report. It may import the core
// packages and bench/peers; nothing in the core module imports it, which is
// why it is a module of its own (gRPC, Thrift, rpcx, arpc, Kitex and gonum
// stay out of the core's graph).
package bench
