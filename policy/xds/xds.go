// Package xds is a Fleet policy Source and registry Discovery fed by an
// xDS management server over ADS (the aggregated discovery service,
// state of the world), using the envoyproxy go-control-plane types
// (github.com/envoyproxy/go-control-plane/envoy) and grpc-go.
//
// A Client subscribes to the RouteConfiguration named after each Fleet
// service watched (RDS), to every cluster (CDS, wildcard) and to the
// ClusterLoadAssignment of each cluster (EDS). Route configurations are
// translated into policy documents (Translate) and delivered to a
// policy.Watcher (the Client is a policy.Source); endpoints are
// delivered as registry instances (the Client is a registry.Discovery),
// each tagged with its cluster so a route's weighted clusters become
// subsets. Each response is ACKed when every resource in it translates
// and checks, else NACKed with the error as error_detail, and the last
// good state stays; so it does while the stream is down, which is
// retried with exponential backoff and full jitter. The guide is the
// "xDS" section of docs/policy.md.
package xds

import (
	"context"
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/policy"
	"github.com/fleetrpc/fleet/registry"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Config configures a Client.
type Config struct {
	// Target is the management server's gRPC target ("host:port").
	// Required.
	Target string
	// NodeID identifies this client to the management server (the
	// snapshot key of go-control-plane's cache). Required.
	NodeID string
	// DialOptions are passed to grpc.NewClient. Default: plaintext
	// (insecure.NewCredentials()).
	DialOptions []grpc.DialOption
	// Network is the network of endpoints whose metadata does not name
	// one. Default "tcp".
	Network string
	// RetryBudget is the budget of every translated retry policy.
	// Default 20% of the calls, at least 10 retries per 10s window.
	RetryBudget *policy.Budget
	// BackoffBase and BackoffMax bound the wait before reconnecting:
	// a random time in [0, min(Max, Base·2^n)] after n failures.
	// Defaults 100ms and 5s.
	BackoffBase, BackoffMax time.Duration
	// Logger receives ACK/NACK and stream records. Default slog.Default().
	Logger *slog.Logger
}

// Stats counts a Client's responses.
type Stats struct {
	ACKs, NACKs int64
	// LastNACK is the error_detail of the last NACK.
	LastNACK string
	// Reconnects counts the streams opened after the first.
	Reconnects int64
}

// Client is an ADS client: a policy.Source of route configurations and a
// registry.Discovery of endpoints. Safe for concurrent use. Close it to
// end the stream and every watch.
type Client struct {
	cfg    Config
	log    *slog.Logger
	conn   *grpc.ClientConn
	cancel context.CancelFunc
	done   chan struct{}
	kick   chan struct{} // resubscribe

	mu       sync.Mutex
	services map[string]int // watched services (policy or instances), by count
	routes   map[string]*routev3.RouteConfiguration
	rdsVer   string
	clusters []string
	cdsSeen  bool // a CDS response was accepted
	cla      map[string]*endpointv3.ClusterLoadAssignment
	changed  chan struct{} // closed and replaced on each accepted change
	closed   bool
	stats    Stats
}

// New dials cfg.Target and starts the ADS stream; it does not wait for
// the first response. Errors (code InvalidArgument) are a missing Target
// or NodeID, or grpc.NewClient's.
func New(cfg Config) (*Client, error) {
	if cfg.Target == "" || cfg.NodeID == "" {
		return nil, fleet.Errorf(fleet.InvalidArgument, "xds: Config needs Target and NodeID")
	}
	if cfg.Network == "" {
		cfg.Network = "tcp"
	}
	if cfg.RetryBudget == nil {
		cfg.RetryBudget = &policy.Budget{Percent: 20}
	}
	if cfg.BackoffBase <= 0 {
		cfg.BackoffBase = 100 * time.Millisecond
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = 5 * time.Second
	}
	opts := cfg.DialOptions
	if opts == nil {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	conn, err := grpc.NewClient(cfg.Target, opts...)
	if err != nil {
		return nil, fleet.Errorf(fleet.InvalidArgument, "xds: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Client{cfg: cfg, log: cfg.Logger, conn: conn, cancel: cancel, done: make(chan struct{}),
		kick: make(chan struct{}, 1), services: map[string]int{}, routes: map[string]*routev3.RouteConfiguration{},
		cla: map[string]*endpointv3.ClusterLoadAssignment{}, changed: make(chan struct{})}
	if c.log == nil {
		c.log = slog.Default()
	}
	go c.run(ctx)
	return c, nil
}

// Stats returns the counts of ACKs, NACKs and reconnects.
func (c *Client) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

// Close ends the stream and every watch.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	close(c.changed)
	c.mu.Unlock()
	c.cancel()
	<-c.done
	return c.conn.Close()
}

func (c *Client) run(ctx context.Context) {
	defer close(c.done)
	for fails := 0; ; {
		healthy := c.stream(ctx)
		if ctx.Err() != nil {
			return
		}
		if healthy {
			fails = 0
		}
		fails++
		d := min(c.cfg.BackoffMax, c.cfg.BackoffBase<<min(fails-1, 20))
		t := time.NewTimer(rand.N(d + 1))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
		c.mu.Lock()
		c.stats.Reconnects++
		c.mu.Unlock()
	}
}

// stream runs one ADS stream until it fails; it reports whether a
// response was received on it.
func (c *Client) stream(ctx context.Context) (healthy bool) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(c.conn).StreamAggregatedResources(ctx)
	if err != nil {
		c.log.Warn("xds: stream", "error", err)
		return false
	}
	node := &corev3.Node{Id: c.cfg.NodeID}
	// Accepted versions and last nonces, per type, on this stream.
	version := map[string]string{}
	nonce := map[string]string{}
	var sendMu sync.Mutex
	send := func(typ string, errDetail error) error {
		c.mu.Lock()
		var names []string
		switch typ {
		case resource.RouteType:
			for s := range c.services {
				names = append(names, s)
			}
			slices.Sort(names)
		case resource.EndpointType:
			names = slices.Clone(c.clusters)
		}
		c.mu.Unlock()
		req := &discoveryv3.DiscoveryRequest{Node: node, TypeUrl: typ, ResourceNames: names,
			VersionInfo: version[typ], ResponseNonce: nonce[typ]}
		if errDetail != nil {
			req.ErrorDetail = &statuspb.Status{Code: int32(fleet.InvalidArgument), Message: errDetail.Error()}
		}
		sendMu.Lock()
		defer sendMu.Unlock()
		return st.Send(req)
	}
	// Requests are sent from this goroutine only (versions and nonces are
	// its own); the receiver hands responses over.
	resps := make(chan *discoveryv3.DiscoveryResponse)
	recvErr := make(chan error, 1)
	go func() {
		for {
			r, err := st.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case resps <- r:
			case <-ctx.Done():
				return
			}
		}
	}()
	for _, typ := range []string{resource.ClusterType, resource.RouteType} {
		if err := send(typ, nil); err != nil {
			return false
		}
	}
	edsSent := false
	for {
		select {
		case <-ctx.Done():
			return healthy
		case err := <-recvErr:
			if ctx.Err() == nil {
				c.log.Warn("xds: stream lost; keeping the last good state", "error", err)
			}
			return healthy
		case <-c.kick:
			if err := send(resource.RouteType, nil); err != nil {
				return healthy
			}
		case r := <-resps:
			healthy = true
			nonce[r.GetTypeUrl()] = r.GetNonce()
			err := c.accept(r)
			if err != nil {
				c.log.Warn("xds: NACK; keeping the last good state", "type", r.GetTypeUrl(), "version", r.GetVersionInfo(), "error", err)
			} else {
				version[r.GetTypeUrl()] = r.GetVersionInfo()
			}
			c.mu.Lock()
			if err != nil {
				c.stats.NACKs++
				c.stats.LastNACK = err.Error()
			} else {
				c.stats.ACKs++
			}
			c.mu.Unlock()
			if err := send(r.GetTypeUrl(), err); err != nil {
				return healthy
			}
			// The cluster list changed (or EDS was never asked for): ask
			// for the new set of assignments.
			if r.GetTypeUrl() == resource.ClusterType && err == nil || !edsSent && r.GetTypeUrl() == resource.ClusterType {
				edsSent = true
				if err := send(resource.EndpointType, nil); err != nil {
					return healthy
				}
			}
		}
	}
}

// accept checks every resource of r and, when all are good, makes them
// the current state and wakes the watches.
func (c *Client) accept(r *discoveryv3.DiscoveryResponse) error {
	switch r.GetTypeUrl() {
	case resource.RouteType:
		got := map[string]*routev3.RouteConfiguration{}
		for _, a := range r.GetResources() {
			rc := &routev3.RouteConfiguration{}
			if err := a.UnmarshalTo(rc); err != nil {
				return fleet.Errorf(fleet.InvalidArgument, "xds: route configuration: %v", err)
			}
			if _, err := Translate(rc, rc.GetName(), r.GetVersionInfo(), *c.cfg.RetryBudget); err != nil {
				return err
			}
			got[rc.GetName()] = rc
		}
		c.mu.Lock()
		// State of the world for RDS: a configuration left out of a
		// response is not removed (as Envoy does).
		for n, rc := range got {
			c.routes[n] = rc
		}
		c.rdsVer = r.GetVersionInfo()
		c.wakeLocked()
		c.mu.Unlock()
	case resource.ClusterType:
		var names []string
		for _, a := range r.GetResources() {
			cl := &clusterv3.Cluster{}
			if err := a.UnmarshalTo(cl); err != nil {
				return fleet.Errorf(fleet.InvalidArgument, "xds: cluster: %v", err)
			}
			if cl.GetName() == "" {
				return fleet.Errorf(fleet.InvalidArgument, "xds: cluster without a name")
			}
			names = append(names, cl.GetName())
		}
		slices.Sort(names)
		c.mu.Lock()
		c.clusters, c.cdsSeen = names, true
		for n := range c.cla {
			if _, ok := slices.BinarySearch(names, n); !ok {
				delete(c.cla, n)
			}
		}
		c.wakeLocked()
		c.mu.Unlock()
	case resource.EndpointType:
		got := map[string]*endpointv3.ClusterLoadAssignment{}
		for _, a := range r.GetResources() {
			cla := &endpointv3.ClusterLoadAssignment{}
			if err := a.UnmarshalTo(cla); err != nil {
				return fleet.Errorf(fleet.InvalidArgument, "xds: cluster load assignment: %v", err)
			}
			if _, err := Instances(cla, "", c.cfg.Network); err != nil {
				return err
			}
			got[cla.GetClusterName()] = cla
		}
		c.mu.Lock()
		for n, cla := range got {
			c.cla[n] = cla
		}
		c.wakeLocked()
		c.mu.Unlock()
	default:
		return fleet.Errorf(fleet.InvalidArgument, "xds: unexpected type %s", r.GetTypeUrl())
	}
	return nil
}

func (c *Client) wakeLocked() {
	if c.closed {
		return
	}
	close(c.changed)
	c.changed = make(chan struct{})
}

// subscribe counts a watch of service; the returned func uncounts it.
func (c *Client) subscribe(service string) func() {
	c.mu.Lock()
	c.services[service]++
	first := c.services[service] == 1
	c.mu.Unlock()
	if first {
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
	return func() {
		c.mu.Lock()
		if c.services[service]--; c.services[service] <= 0 {
			delete(c.services, service)
		}
		c.mu.Unlock()
	}
}

// docLocked returns service's policy document as JSON, nil when the
// management server has given no route configuration for it.
func (c *Client) docLocked(service string) []byte {
	rc := c.routes[service]
	if rc == nil {
		return nil
	}
	// Wait for the endpoints of the clusters the routes name, so that
	// a route does not send calls to a subset not known yet (gRPC's xDS
	// client waits likewise); a cluster CDS does not list has none.
	for _, n := range c.clustersLocked(service) {
		if _, known := c.cla[n]; !known && n != service && (!c.cdsSeen || slices.Contains(c.clusters, n)) {
			return nil
		}
	}
	doc, err := Translate(rc, service, c.rdsVer, *c.cfg.RetryBudget)
	if err != nil { // checked when accepted
		return nil
	}
	b, _ := json.Marshal(doc)
	return b
}

// Watch delivers service's policy document, translated from the
// RouteConfiguration named service, each time an RDS response that holds
// it is accepted (policy.Source). The document's version is the RDS
// version_info. Nothing is delivered until the management server sends
// the configuration and the assignments (EDS) of the clusters its routes
// name (a cluster CDS does not list counts as empty), nor while the
// stream is down. Errors: ErrClosed
// after Close.
func (c *Client) Watch(ctx context.Context, service string) (<-chan []byte, error) {
	return watch(c, ctx, service, func() ([]byte, bool) {
		d := c.docLocked(service)
		return d, d != nil
	}, func(a, b []byte) bool { return string(a) == string(b) })
}

// ErrClosed is returned by a closed Client.
var ErrClosed = fleet.NewError(fleet.Unavailable, "xds: client closed")

func watch[T any](c *Client, ctx context.Context, service string, get func() (T, bool), same func(a, b T) bool) (<-chan T, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	c.mu.Unlock()
	unsub := c.subscribe(service)
	out := make(chan T)
	go func() {
		defer close(out)
		defer unsub()
		var last T
		sent := false
		for {
			c.mu.Lock()
			v, ok := get()
			ch, closed := c.changed, c.closed
			c.mu.Unlock()
			if closed {
				return
			}
			if ok && (!sent || !same(last, v)) {
				select {
				case out <- v:
					last, sent = v, true
				case <-ctx.Done():
					return
				}
			}
			select {
			case <-ch:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// clustersLocked returns the clusters holding service's instances: those
// service's route configuration names, and the cluster named service.
func (c *Client) clustersLocked(service string) []string {
	set := map[string]bool{service: true}
	if rc := c.routes[service]; rc != nil {
		for _, vh := range rc.GetVirtualHosts() {
			for _, r := range vh.GetRoutes() {
				ra := r.GetRoute()
				if n := ra.GetCluster(); n != "" {
					set[n] = true
				}
				for _, w := range ra.GetWeightedClusters().GetClusters() {
					set[w.GetName()] = true
				}
			}
		}
	}
	var out []string
	for n := range set {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func (c *Client) instancesLocked(service string) ([]registry.Instance, bool) {
	var list []registry.Instance
	any := false
	for _, n := range c.clustersLocked(service) {
		cla := c.cla[n]
		if cla == nil {
			continue
		}
		any = true
		ins, _ := Instances(cla, service, c.cfg.Network) // checked when accepted
		list = append(list, ins...)
	}
	registry.Sort(list)
	return list, any
}

// Instances returns service's instances: the endpoints of the clusters
// its route configuration names and of the cluster named service
// (registry.Discovery), each tagged ClusterTagPrefix+cluster. It waits
// for the first assignment until ctx ends (then code DeadlineExceeded or
// Canceled). Errors: ErrClosed after Close.
func (c *Client) Instances(ctx context.Context, service string) ([]registry.Instance, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the watch
	ch, err := c.WatchInstances(ctx, service)
	if err != nil {
		return nil, err
	}
	select {
	case l, ok := <-ch:
		if !ok {
			if ctx.Err() != nil {
				return nil, fleet.FromContextError(ctx.Err())
			}
			return nil, ErrClosed
		}
		return l, nil
	case <-ctx.Done():
		return nil, fleet.FromContextError(ctx.Err())
	}
}

// WatchInstances is Watch of registry.Discovery: the full sorted list
// each time it changes.
func (c *Client) WatchInstances(ctx context.Context, service string) (<-chan []registry.Instance, error) {
	return watch(c, ctx, service, func() ([]registry.Instance, bool) { return c.instancesLocked(service) },
		func(a, b []registry.Instance) bool {
			return slices.EqualFunc(a, b, func(x, y registry.Instance) bool {
				bx, _ := x.Marshal()
				by, _ := y.Marshal()
				return string(bx) == string(by)
			})
		})
}

// Discovery returns c as a registry.Discovery (whose Watch is
// WatchInstances). Closing it closes c.
func (c *Client) Discovery() registry.Discovery { return discovery{c} }

type discovery struct{ c *Client }

func (d discovery) Instances(ctx context.Context, s string) ([]registry.Instance, error) {
	return d.c.Instances(ctx, s)
}
func (d discovery) Watch(ctx context.Context, s string) (<-chan []registry.Instance, error) {
	return d.c.WatchInstances(ctx, s)
}
func (d discovery) Close() error { return d.c.Close() }

var _ policy.Source = (*Client)(nil)
