// Package mdns is the registry without a server, for one local network:
// multicast DNS service discovery (RFC 6762, RFC 6763) with
// github.com/hashicorp/mdns.
//
// Registrar: each registered instance is advertised by its own mDNS
// responder as the DNS-SD service "_fleet-<service>._tcp" in Domain
// (default "local."), instance name and host name derived from its Key,
// SRV port and A/AAAA addresses from its Addr, and TXT strings carrying
// the fields of its JSON record (see EncodeTXT). Only "host:port"
// addresses can be advertised: unix sockets cannot. An address with an
// empty or unspecified host (":8972", "0.0.0.0:8972") is advertised with
// the addresses of Config.Interface (or of every interface that is up),
// and discovered with the address the answer came with. Update restarts
// the responder with the new TXT strings; Deregister and Close stop
// responding. mDNS has no lease: nothing tells clients an instance left,
// and hashicorp/mdns sends no goodbye packets, so watchers drop an
// instance once it has not answered for Config.Expiry.
//
// Discovery: Instances sends one query and collects answers for
// QueryTimeout (default 1s). Watch queries every Interval (default 5s)
// and delivers the list whenever it changed.
//
// Multicast must reach the responders: on one host, loopback works on
// Linux (Config.Interface = the "lo" interface); across hosts the
// network must pass 224.0.0.251:5353 (and ff02::fb with IPv6).
//
// This package owns the mdns backend: it is a module of its own, so that
// the mDNS library (github.com/hashicorp/mdns) stays out of the core module's graph. It imports registry and
// registry/internal/regutil; it must not import client or server, which
// take it as a registry.Registrar or registry.Discovery.
package mdns
