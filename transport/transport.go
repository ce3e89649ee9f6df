package transport

import (
	"context"
	"net"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/fleetrpc/fleet"
)

// Transport opens listeners and connections for one network. Both methods
// must be safe for concurrent use.
type Transport interface {
	// Listen listens at addr (its form is the transport's, "host:port"
	// for the UDP transports). ctx bounds setting the listener up only;
	// the listener lives until it is closed.
	Listen(ctx context.Context, addr string) (net.Listener, error)
	// Dial connects to addr. ctx bounds connecting (and any handshake);
	// it does not limit the connection's life.
	Dial(ctx context.Context, addr string) (net.Conn, error)
}

var (
	mu       sync.RWMutex
	networks = map[string]Transport{}
)

// nameRE is the form of a network name: a lowercase letter, then
// lowercase letters, digits, '-' or '_', at most 32 bytes.
var nameRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)

// builtin lists the networks served without a Transport: the stream
// networks of package net and Fleet's "tls". They cannot be registered.
var builtin = map[string]bool{
	"tcp": true, "tcp4": true, "tcp6": true,
	"unix": true, "unixpacket": true, "tls": true,
}

// Builtin reports whether network is served by the net package (or is
// Fleet's "tls"), without a registered Transport.
func Builtin(network string) bool { return builtin[network] }

// Register makes t available under network; a later Register of the same
// name replaces it (a program may re-register "quic" with its own TLS
// configuration, for example). It panics when network is not a valid name
// (a lowercase letter, then lowercase letters, digits, '-' or '_', at most
// 32 bytes), is a built-in network, or t is nil: these are programming
// errors. Safe for concurrent use.
func Register(network string, t Transport) {
	if !nameRE.MatchString(network) {
		panic("transport: invalid network name " + network)
	}
	if builtin[network] {
		panic("transport: cannot register built-in network " + network)
	}
	if t == nil {
		panic("transport: nil Transport for " + network)
	}
	mu.Lock()
	networks[network] = t
	mu.Unlock()
}

// Lookup returns the Transport registered under network. Safe for
// concurrent use.
func Lookup(network string) (Transport, bool) {
	mu.RLock()
	t, ok := networks[network]
	mu.RUnlock()
	return t, ok
}

// Networks returns the registered network names, sorted.
func Networks() []string {
	mu.RLock()
	out := make([]string, 0, len(networks))
	for n := range networks {
		out = append(out, n)
	}
	mu.RUnlock()
	sort.Strings(out)
	return out
}

// Get returns the Transport for network, or an error with code
// InvalidArgument naming the networks that are available when none is
// registered under it (typically: the transport's module is not imported).
func Get(network string) (Transport, error) {
	if t, ok := Lookup(network); ok {
		return t, nil
	}
	known := "none"
	if n := Networks(); len(n) > 0 {
		known = strings.Join(n, ", ")
	}
	return nil, fleet.Errorf(fleet.InvalidArgument,
		"unknown network %q: not built in (tcp, tcp4, tcp6, unix, tls) and no transport registered under it (registered: %s); import its transport module, such as github.com/fleetrpc/fleet/transport/kcp",
		network, known)
}

// SplitAddr splits an address of the form "network@addr", as a registry
// entry may write it ("kcp@127.0.0.1:8972"), into its network and address.
// When s has no such prefix (no '@', or text before the first '@' that is
// not a valid network name, as in a Unix abstract socket "@name"), it
// returns "" and s unchanged.
func SplitAddr(s string) (network, addr string) {
	name, rest, ok := strings.Cut(s, "@")
	if !ok || !nameRE.MatchString(name) {
		return "", s
	}
	return name, rest
}
