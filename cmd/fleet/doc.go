// Command fleet is Fleet's command line: `fleet demo` runs the main job (a
// server and a client under load, printing throughput and latency) and
// `fleet bench` compares Fleet with its peers.
//
// It owns the command line only: flags, subcommands and output. It may
// import every Fleet module; no other module imports it.
package main
