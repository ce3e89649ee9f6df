package xds_test

import (
	"context"
	"math"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	commonfault "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/common/fault/v3"
	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/policy"
	"github.com/fleetrpc/fleet/policy/policytest"
	"github.com/fleetrpc/fleet/policy/xds"
	"github.com/fleetrpc/fleet/selector"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

const node = "fleet-test"

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// mgmt is go-control-plane's ADS server with a snapshot cache on a
// loopback port.
type mgmt struct {
	cache cachev3.SnapshotCache
	addr  string
	gs    *grpc.Server
	done  chan struct{}

	mu        sync.Mutex
	errDetail string // the error_detail of the last NACK received
}

func (m *mgmt) lastNACK() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.errDetail
}

func (m *mgmt) start(t *testing.T) {
	t.Helper()
	addr := m.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	var lis net.Listener
	var err error
	for range 50 { // the port of a stopped server may take a moment to free
		if lis, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	m.addr = lis.Addr().String()
	m.gs = grpc.NewServer()
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(m.gs, serverv3.NewServer(context.Background(), m.cache,
		serverv3.CallbackFuncs{StreamRequestFunc: func(_ int64, r *discoveryv3.DiscoveryRequest) error {
			if d := r.GetErrorDetail(); d != nil {
				m.mu.Lock()
				m.errDetail = d.GetMessage()
				m.mu.Unlock()
			}
			return nil
		}}))
	m.done = make(chan struct{})
	go func() { defer close(m.done); m.gs.Serve(lis) }()
}

func (m *mgmt) stop() { m.gs.Stop(); <-m.done }

func (m *mgmt) set(t *testing.T, version string, nodes map[string][]*policytest.Node, rc *routev3.RouteConfiguration) {
	t.Helper()
	var clusters, clas []types.Resource
	for name, ns := range nodes {
		clusters = append(clusters, &clusterv3.Cluster{Name: name, ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS}})
		cla := &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpointv3.LocalityLbEndpoints{{}}}
		for _, n := range ns {
			cla.Endpoints[0].LbEndpoints = append(cla.Endpoints[0].LbEndpoints, &endpointv3.LbEndpoint{
				HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: &corev3.Address{
					Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{Address: n.Instance().Addr}}}}}})
		}
		clas = append(clas, cla)
	}
	snap, err := cachev3.NewSnapshot(version, map[resource.Type][]types.Resource{
		resource.ClusterType: clusters, resource.EndpointType: clas, resource.RouteType: {rc}})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.cache.SetSnapshot(context.Background(), node, snap); err != nil {
		t.Fatal(err)
	}
}

func split(v1, v2 uint32, extra ...*routev3.Route) *routev3.RouteConfiguration {
	r := &routev3.Route{Name: "split", Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
		Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_WeightedClusters{
			WeightedClusters: &routev3.WeightedCluster{Clusters: []*routev3.WeightedCluster_ClusterWeight{
				{Name: "echo-v1", Weight: wrapperspb.UInt32(v1)}, {Name: "echo-v2", Weight: wrapperspb.UInt32(v2)}}}}}}}
	return &routev3.RouteConfiguration{Name: "Echo", VirtualHosts: []*routev3.VirtualHost{
		{Name: "echo", Domains: []string{"*"}, Routes: append(extra, r)}}}
}

func headerRoute(name string, sm *matcherv3.StringMatcher) *routev3.Route {
	return &routev3.Route{Name: name, Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/Echo/"},
		Headers: []*routev3.HeaderMatcher{{Name: "x-env", HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: sm}}}},
		Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "echo-v2"}}}}
}

type env struct {
	m  *mgmt
	xc *xds.Client
	f  *policytest.Fixture
	ns map[string][]*policytest.Node
}

func setup(t *testing.T) *env {
	e := &env{m: &mgmt{cache: cachev3.NewSnapshotCache(true, cachev3.IDHash{}, nil)}, f: &policytest.Fixture{},
		ns: map[string][]*policytest.Node{}}
	for i, name := range []string{"v1-0", "v1-1", "v2-0", "v2-1"} {
		n, err := policytest.Start(name, name[:2], name[:2])
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.Close)
		if i < 2 {
			e.f.V1 = append(e.f.V1, n)
			e.ns["echo-v1"] = append(e.ns["echo-v1"], n)
		} else {
			e.f.V2 = append(e.f.V2, n)
			e.ns["echo-v2"] = append(e.ns["echo-v2"], n)
		}
	}
	e.m.start(t)
	t.Cleanup(func() { e.m.stop() })
	var err error
	e.xc, err = xds.New(xds.Config{Target: e.m.addr, NodeID: node, Network: "inprocess", Logger: policytest.Quiet,
		BackoffBase: 20 * time.Millisecond, BackoffMax: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.xc.Close() })
	e.f.W, err = policy.NewWatcher(e.xc, "Echo", policy.WatcherConfig{Logger: policytest.Quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.f.W.Close() })
	// The endpoints first, so that the XClient starts with every server.
	e.set(t, "init", split(100, 0))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		list, err := e.xc.Instances(ctx, "Echo")
		if err != nil {
			t.Fatal(err)
		}
		if len(list) == 4 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	e.f.X, err = client.NewXClient("Echo", e.xc.Discovery(), client.WithSelector(selector.NewRandom()),
		client.WithPolicy(policy.NewClient(e.f.W)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.f.X.Close() })
	return e
}

func (e *env) set(t *testing.T, version string, rc *routev3.RouteConfiguration) {
	t.Helper()
	e.m.set(t, version, e.ns, rc)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := e.f.W.Wait(ctx, version); err != nil {
		t.Fatalf("version %s not applied: %v (%+v, %+v)", version, err, e.f.W.Stats(), e.xc.Stats())
	}
}

func (e *env) v2Share(t *testing.T, ctx context.Context, n int) float64 {
	t.Helper()
	sh, errs := e.f.Run(ctx, n, "Do", policytest.Req{})
	if len(errs) > 0 {
		t.Fatalf("%d failed calls, first %v", len(errs), errs[0])
	}
	return sh.Percent(e.f.V2[0].Name, e.f.V2[1].Name)
}

// TestCanaryHeaderNackRestart drives one XClient from go-control-plane's
// server: weighted clusters split 10,000 calls within ±2 points, a
// header route takes exactly the calls with the header, an invalid route
// is NACKed with the last good policy kept, and a management-server
// restart is survived.
func TestCanaryHeaderNackRestart(t *testing.T) {
	e := setup(t)
	bg := context.Background()
	for i, pct := range []uint32{5, 50} {
		v := "c" + string(rune('0'+i))
		e.set(t, v, split(100-pct, pct))
		got := e.v2Share(t, bg, 10000)
		t.Logf("set %d%% to echo-v2 through RDS, observed %.2f%%", pct, got)
		if math.Abs(got-float64(pct)) > 2 {
			t.Fatalf("set %d%%, observed %.2f%%", pct, got)
		}
	}

	e.set(t, "hdr", split(100, 0, headerRoute("canary", &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "canary"}})))
	canary := fleet.AppendOutgoingMetadata(bg, "x-env", "canary")
	other := fleet.AppendOutgoingMetadata(bg, "x-env", "canary-not")
	if got := e.v2Share(t, canary, 800); got != 100 {
		t.Fatalf("with the header: %.2f%% to v2", got)
	}
	if got := e.v2Share(t, other, 800); got != 0 {
		t.Fatalf("with another value: %.2f%% to v2", got)
	}
	if got := e.v2Share(t, bg, 800); got != 0 {
		t.Fatalf("without the header: %.2f%% to v2", got)
	}

	// A regular expression that does not compile: NACKed, "hdr" stays.
	nacks := e.xc.Stats().NACKs
	e.m.set(t, "bad", e.ns, split(100, 0, headerRoute("bad", &matcherv3.StringMatcher{
		MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "(unclosed"}}})))
	deadline := time.Now().Add(20 * time.Second)
	for e.xc.Stats().NACKs == nacks {
		if time.Now().After(deadline) {
			t.Fatalf("no NACK: %+v", e.xc.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st := e.xc.Stats(); !strings.Contains(st.LastNACK, "(bad)") || !strings.Contains(st.LastNACK, "unclosed") {
		t.Fatalf("NACK detail %q", st.LastNACK)
	}
	for e.m.lastNACK() == "" {
		if time.Now().After(deadline) {
			t.Fatal("the management server received no error_detail")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if d := e.m.lastNACK(); !strings.Contains(d, "unclosed") {
		t.Fatalf("the management server received error_detail %q", d)
	}
	if v := e.f.W.Stats().Version; v != "hdr" {
		t.Fatalf("after the NACK the version in force is %q", v)
	}
	if got := e.v2Share(t, canary, 400); got != 100 {
		t.Fatalf("after the NACK, with the header: %.2f%% to v2", got)
	}

	// The management server goes away: the last good state serves.
	e.m.stop()
	if got := e.v2Share(t, canary, 400); got != 100 {
		t.Fatalf("during the outage: %.2f%% to v2", got)
	}
	// It comes back (empty cache, as after a restart) and gets a new
	// snapshot: the client reconnects and applies it.
	e.m.cache = cachev3.NewSnapshotCache(true, cachev3.IDHash{}, nil)
	e.m.start(t)
	e.set(t, "after-restart", split(0, 100))
	if got := e.v2Share(t, bg, 400); got != 100 {
		t.Fatalf("after the restart: %.2f%% to v2", got)
	}
	if e.xc.Stats().Reconnects == 0 {
		t.Fatal("no reconnect counted")
	}
}

// TestFault: an HTTPFault abort of 10% of the calls carrying x-test, set
// through RDS, fails 10% ±2 points of them over 10,000 calls (with
// num_retries 0) and no other call.
func TestFault(t *testing.T) {
	e := setup(t)
	abort, err := anypb.New(&faultv3.HTTPFault{Abort: &faultv3.FaultAbort{ErrorType: &faultv3.FaultAbort_GrpcStatus{GrpcStatus: 14},
		Percentage: &typev3.FractionalPercent{Numerator: 10}}})
	if err != nil {
		t.Fatal(err)
	}
	fr := &routev3.Route{Name: "fault", Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: "/Echo/Do"},
		Headers: []*routev3.HeaderMatcher{{Name: "x-test", HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}}}},
		Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "echo-v1"},
			RetryPolicy: &routev3.RetryPolicy{NumRetries: wrapperspb.UInt32(0)}}},
		TypedPerFilterConfig: map[string]*anypb.Any{"envoy.filters.http.fault": abort}}
	e.set(t, "fault", split(50, 50, fr))
	matched := fleet.AppendOutgoingMetadata(context.Background(), "x-test", "1")
	_, errs := e.f.Run(matched, 10000, "Do", policytest.Req{})
	for _, err := range errs {
		if fleet.CodeOf(err) != fleet.Unavailable || !strings.Contains(err.Error(), "fault injected") {
			t.Fatalf("unexpected failure %v", err)
		}
	}
	share := 100 * float64(len(errs)) / 10000
	t.Logf("aborted %.2f%% of the matched calls", share)
	if math.Abs(share-10) > 2 {
		t.Fatalf("aborted %.2f%% of the matched calls, want 10±2", share)
	}
	for _, c := range []struct {
		ctx    context.Context
		method string
	}{{context.Background(), "Do"}, {matched, "Other"}} {
		if _, errs := e.f.Run(c.ctx, 2000, c.method, policytest.Req{}); len(errs) > 0 {
			t.Fatalf("unmatched calls (%s) failed: %v", c.method, errs[0])
		}
	}
}

// TestLiveTimeout: a route timeout changed through RDS is seen on the
// next call.
func TestLiveTimeout(t *testing.T) {
	e := setup(t)
	withTimeout := func(d time.Duration) *routev3.RouteConfiguration {
		rc := split(50, 50)
		rc.VirtualHosts[0].Routes[0].GetRoute().Timeout = durationpb.New(d)
		return rc
	}
	slow := policytest.Req{Sleep: 300 * time.Millisecond}
	var rep policytest.Rep
	e.set(t, "t-short", withTimeout(50*time.Millisecond))
	if err := e.f.X.Call(context.Background(), "Do", &slow, &rep); fleet.CodeOf(err) != fleet.DeadlineExceeded {
		t.Fatalf("with a 50ms route timeout, a 300ms call gave %v", err)
	}
	e.set(t, "t-long", withTimeout(10*time.Second))
	if err := e.f.X.Call(context.Background(), "Do", &slow, &rep); err != nil {
		t.Fatalf("with a 10s route timeout, a 300ms call gave %v", err)
	}
}

// TestTranslate checks the mapping of timeout, retry, hedge and fault.
func TestTranslate(t *testing.T) {
	fault, err := anypb.New(&faultv3.HTTPFault{
		Delay: &commonfault.FaultDelay{FaultDelaySecifier: &commonfault.FaultDelay_FixedDelay{FixedDelay: durationpb.New(200 * time.Millisecond)},
			Percentage: &typev3.FractionalPercent{Numerator: 10}},
		Abort: &faultv3.FaultAbort{ErrorType: &faultv3.FaultAbort_GrpcStatus{GrpcStatus: 14},
			Percentage: &typev3.FractionalPercent{Numerator: 500, Denominator: typev3.FractionalPercent_TEN_THOUSAND}}})
	if err != nil {
		t.Fatal(err)
	}
	rc := split(1, 2)
	r := rc.VirtualHosts[0].Routes[0]
	r.Match.PathSpecifier = &routev3.RouteMatch_Path{Path: "/Echo/Do"}
	r.Match.RuntimeFraction = &corev3.RuntimeFractionalPercent{DefaultValue: &typev3.FractionalPercent{Numerator: 25}}
	r.TypedPerFilterConfig = map[string]*anypb.Any{"envoy.filters.http.fault": fault}
	ra := r.GetRoute()
	ra.Timeout = durationpb.New(time.Second)
	ra.RetryPolicy = &routev3.RetryPolicy{RetryOn: "unavailable,deadline-exceeded", NumRetries: wrapperspb.UInt32(2),
		RetryBackOff: &routev3.RetryPolicy_RetryBackOff{BaseInterval: durationpb.New(10 * time.Millisecond)}}
	doc, err := xds.Translate(rc, "Echo", "7", policy.Budget{Percent: 20})
	if err != nil {
		t.Fatal(err)
	}
	got := doc.Routes[0]
	if got.Match.Method != "Do" || *got.Match.Percent != 25 || got.Timeout.D() != time.Second ||
		got.Destinations[0].Weight != 33 || got.Destinations[1].Weight != 67 ||
		got.Retry.Attempts != 3 || strings.Join(got.Retry.RetryOn, ",") != "unavailable,deadline_exceeded" ||
		got.Retry.Backoff.Base.D() != 10*time.Millisecond || got.Retry.Backoff.Max.D() != 100*time.Millisecond ||
		got.Fault.Delay.Percent != 10 || got.Fault.Delay.Duration.D() != 200*time.Millisecond ||
		got.Fault.Abort.Code != "unavailable" || got.Fault.Abort.Percent != 5 {
		t.Fatalf("translated %+v", got)
	}
	ra.RetryPolicy.PerTryTimeout = durationpb.New(20 * time.Millisecond)
	ra.HedgePolicy = &routev3.HedgePolicy{HedgeOnPerTryTimeout: true}
	doc, err = xds.Translate(rc, "Echo", "8", policy.Budget{Percent: 20})
	if err != nil || doc.Routes[0].Retry != nil || *doc.Routes[0].Hedge != (policy.Hedge{Attempts: 3, Delay: policy.Duration(20 * time.Millisecond)}) {
		t.Fatalf("hedge: %v %+v", err, doc)
	}
	r.Match.PathSpecifier = &routev3.RouteMatch_Path{Path: "/Other/Do"}
	if _, err := xds.Translate(rc, "Echo", "9", policy.Budget{Percent: 20}); fleet.CodeOf(err) != fleet.InvalidArgument {
		t.Fatalf("a path of another service: %v", err)
	}
}

// TestTranslateRefuses checks that what Fleet cannot represent, or what
// is invalid, is refused with InvalidArgument.
func TestTranslateRefuses(t *testing.T) {
	for name, edit := range map[string]func(r *routev3.Route){
		"partial method prefix": func(r *routev3.Route) { r.Match.PathSpecifier = &routev3.RouteMatch_Prefix{Prefix: "/Echo/D"} },
		"regex path": func(r *routev3.Route) {
			r.Match.PathSpecifier = &routev3.RouteMatch_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: ".*"}}
		},
		"suffix header": func(r *routev3.Route) {
			r.Match.Headers = []*routev3.HeaderMatcher{{Name: "x", HeaderMatchSpecifier: &routev3.HeaderMatcher_SuffixMatch{SuffixMatch: "a"}}}
		},
		"percent above 100": func(r *routev3.Route) {
			r.Match.RuntimeFraction = &corev3.RuntimeFractionalPercent{DefaultValue: &typev3.FractionalPercent{Numerator: 150}}
		},
		"http retry condition": func(r *routev3.Route) {
			r.GetRoute().RetryPolicy = &routev3.RetryPolicy{RetryOn: "5xx"}
		},
		"zero weights": func(r *routev3.Route) {
			for _, c := range r.GetRoute().GetWeightedClusters().Clusters {
				c.Weight = wrapperspb.UInt32(0)
			}
		},
	} {
		rc := split(50, 50)
		edit(rc.VirtualHosts[0].Routes[0])
		if _, err := xds.Translate(rc, "Echo", "1", policy.Budget{Percent: 20}); fleet.CodeOf(err) != fleet.InvalidArgument {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Weights that do not divide 100 evenly still sum to 100.
	doc, err := xds.Translate(&routev3.RouteConfiguration{Name: "Echo", VirtualHosts: []*routev3.VirtualHost{{Domains: []string{"Echo"},
		Routes: []*routev3.Route{{Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_WeightedClusters{
			WeightedClusters: &routev3.WeightedCluster{Clusters: []*routev3.WeightedCluster_ClusterWeight{
				{Name: "a", Weight: wrapperspb.UInt32(1)}, {Name: "b", Weight: wrapperspb.UInt32(1)}, {Name: "c", Weight: wrapperspb.UInt32(1)}}}}}}}}}}},
		"Echo", "1", policy.Budget{Percent: 20})
	if err != nil {
		t.Fatal(err)
	}
	sum := 0
	for _, d := range doc.Routes[0].Destinations {
		sum += d.Weight
	}
	if sum != 100 || len(doc.Subsets) != 3 || doc.Subsets[2].Tags[0] != xds.ClusterTagPrefix+"c" {
		t.Fatalf("%+v", doc)
	}
}
