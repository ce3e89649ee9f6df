// Package chaos holds Fleet's chaos tests: real network faults injected by
// Shopify's toxiproxy (run in-process) between clients and servers. It has
// no non-test code; it is a module of its own so that toxiproxy and its
// dependencies never enter the core module's graph.
package chaos
