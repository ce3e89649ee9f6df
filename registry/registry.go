package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Instance is one server of one service as a registry records it.
// The zero value is not a valid instance: Service and Addr are required.
type Instance struct {
	Service string `json:"service"`
	// Addr is the address clients dial, "host:port" for TCP, a path for
	// a Unix socket.
	Addr string `json:"addr"`
	// Network is "tcp" (when empty), "unix", "tls", or a network
	// registered with package transport ("kcp", "quic"). When it is empty
	// and Addr has the form "network@addr" ("kcp@127.0.0.1:8972"),
	// client.XClient dials that network.
	Network string `json:"network,omitempty"`
	// Weight is the relative share of traffic for weighted selectors;
	// 0 means 1.
	Weight    int               `json:"weight,omitempty"`
	Group     string            `json:"group,omitempty"`
	Version   string            `json:"version,omitempty"`
	Tags      []string          `json:"tags,omitempty"`
	Latitude  float64           `json:"lat,omitempty"`
	Longitude float64           `json:"lon,omitempty"`
	State     State             `json:"state,omitempty"`
	Load      Load              `json:"load,omitempty"`
	Meta      map[string]string `json:"meta,omitempty"`
}

// State is an instance's serving state. The empty state means Active.
type State string

// The states.
const (
	Active   State = "active"   // taking calls
	Draining State = "draining" // shutting down; clients stop choosing it
)

// Load is what a server reports of its current work, published into its
// registry entry at an interval so clients can prefer the least loaded.
type Load struct {
	InFlight       int64   `json:"inflight"`         // calls being handled now
	CallsPerSecond float64 `json:"calls_per_second"` // over the last reporting interval
	// P99Ms is the 99th percentile of the time the server took to
	// handle the calls of the last reporting interval, in milliseconds:
	// the upper bound of a histogram bucket, at most 25% above the true
	// figure. 0 when the interval had no calls or the publisher does
	// not measure it.
	P99Ms float64 `json:"p99_ms,omitempty"`
}

// Key returns the instance's identity within its service: Network and Addr.
func (in Instance) Key() string {
	if in.Network == "" || in.Network == "tcp" {
		return in.Addr
	}
	return in.Network + "@" + in.Addr
}

// EffectiveWeight returns Weight, or 1 when Weight is 0 or negative.
func (in Instance) EffectiveWeight() int {
	if in.Weight <= 0 {
		return 1
	}
	return in.Weight
}

// Validate returns an error when Service or Addr is empty or Service holds
// a '/', which backends use as a path separator.
func (in Instance) Validate() error {
	switch {
	case in.Service == "":
		return errors.New("registry: instance has no service")
	case in.Addr == "":
		return errors.New("registry: instance has no address")
	case strings.ContainsRune(in.Service, '/'):
		return fmt.Errorf("registry: service name %q contains '/'", in.Service)
	}
	return nil
}

// Marshal encodes the instance as JSON, the value format every backend
// stores.
func (in Instance) Marshal() ([]byte, error) { return json.Marshal(in) }

// Unmarshal decodes an instance stored by Marshal.
func Unmarshal(b []byte) (Instance, error) {
	var in Instance
	if err := json.Unmarshal(b, &in); err != nil {
		return Instance{}, fmt.Errorf("registry: bad instance record: %w", err)
	}
	return in, in.Validate()
}

// Sort orders instances by Key, the order every Discovery returns.
func Sort(list []Instance) {
	sort.Slice(list, func(i, j int) bool { return list[i].Key() < list[j].Key() })
}

// Registrar is the server side: it records instances in a registry and
// keeps each record alive (lease, session, TTL refresh) until Deregister or
// Close, restoring it by itself when the registry loses it (an expired
// session or lease). Implementations are safe for concurrent use.
type Registrar interface {
	// Register records in and keeps it alive. Registering the same
	// service and Key again replaces the record.
	Register(ctx context.Context, in Instance) error
	// Update replaces the record of an instance already registered,
	// typically to publish its Load or State.
	Update(ctx context.Context, in Instance) error
	// Deregister removes the record and stops keeping it alive.
	Deregister(ctx context.Context, in Instance) error
	// Close stops every keep-alive without deregistering (records then
	// expire by TTL) and releases the registry connection.
	Close() error
}

// Discovery is the client side: the current instances of a service and a
// stream of changes. Implementations are safe for concurrent use.
type Discovery interface {
	// Instances returns the service's instances, sorted by Key.
	Instances(ctx context.Context, service string) ([]Instance, error)
	// Watch delivers the full, sorted list of the service's instances
	// each time it changes, starting with the current list, until ctx is
	// done or the Discovery is closed; then the channel is closed. While
	// the registry is unreachable nothing is delivered (clients keep the
	// last list); when it returns the current list is delivered again.
	// Each list is the receiver's own slice, but its instances' Tags and
	// Meta may be shared with other lists and with the Discovery: read
	// them, do not modify them.
	Watch(ctx context.Context, service string) (<-chan []Instance, error)
	// Close releases the registry connection and ends every watch.
	Close() error
}

// ServiceLister is an optional ability of a Discovery, found by type
// assertion: the names of the services a registry holds, as `fleet list
// etcd://host:port` and the dashboard show them. The etcd, ZooKeeper,
// Redis, NATS and static backends implement it; mDNS does not (a browse
// of every service type on the link is not what a client asks for).
type ServiceLister interface {
	// Services returns the names of the services that have at least one
	// instance record, sorted, without duplicates; an empty registry
	// gives an empty list and no error. Records that do not decode are
	// skipped. It fails when the registry cannot be reached within ctx
	// and with ErrClosed after Close.
	Services(ctx context.Context) ([]string, error)
}
