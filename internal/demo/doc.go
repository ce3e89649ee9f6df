// Package demo holds what `fleet demo` runs: the Arith and Hello services
// and a load generator that reports throughput and latency.
//
// It owns the demo's services and load generator. It may import the core
// packages and internal/benchpb; it must not import a registry backend or
// anything outside the core module, so the core tests can use it.
package demo
