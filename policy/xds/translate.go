package xds

import (
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	commonfault "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/common/fault/v3"
	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/policy"
	"github.com/fleetrpc/fleet/registry"
)

// ClusterTagPrefix prefixes the tag each endpoint carries naming its
// cluster ("xds-cluster=NAME"); the subsets a translated policy names
// select instances by it.
const ClusterTagPrefix = "xds-cluster="

// Translate turns the RouteConfiguration of service (xDS RDS) into a Fleet
// policy document of the given version, and checks it (policy.Compile).
// The virtual host whose domains hold service (else "*", else the first)
// gives the routes, in order. Each cluster a route names becomes a subset
// of the same name selecting the instances tagged ClusterTagPrefix+name;
// weighted_clusters' weights are scaled to sum to 100 (largest
// remainder). budget is the retry budget given to routes with retries
// (xDS carries it on the cluster, Fleet on the route). Errors (code
// InvalidArgument) name the route and what Fleet cannot represent or
// what is invalid; they are what the NACK's error_detail carries.
func Translate(rc *routev3.RouteConfiguration, service, version string, budget policy.Budget) (*policy.Document, error) {
	doc := &policy.Document{Version: version, Service: service}
	vh := pickHost(rc.GetVirtualHosts(), service)
	subsets := map[string]bool{}
	for i, r := range vh.GetRoutes() {
		pr, err := translateRoute(r, vh, service, budget)
		if err != nil {
			name := r.GetName()
			if name == "" {
				name = "#" + strconv.Itoa(i)
			}
			return nil, fleet.Errorf(fleet.InvalidArgument, "xds: route configuration %q, route %s: %v", rc.GetName(), name, err)
		}
		for _, d := range pr.Destinations {
			if !subsets[d.Subset] {
				subsets[d.Subset] = true
				doc.Subsets = append(doc.Subsets, policy.Subset{Name: d.Subset, Tags: []string{ClusterTagPrefix + d.Subset}})
			}
		}
		doc.Routes = append(doc.Routes, pr)
	}
	if _, err := policy.Compile(doc); err != nil {
		return nil, fleet.Errorf(fleet.InvalidArgument, "xds: route configuration %q: %s", rc.GetName(),
			strings.TrimPrefix(err.Error(), fleet.InvalidArgument.String()+": "))
	}
	return doc, nil
}

func pickHost(hosts []*routev3.VirtualHost, service string) *routev3.VirtualHost {
	for _, want := range []string{service, "*"} {
		for _, h := range hosts {
			if slices.Contains(h.GetDomains(), want) {
				return h
			}
		}
	}
	if len(hosts) > 0 {
		return hosts[0]
	}
	return nil
}

func translateRoute(r *routev3.Route, vh *routev3.VirtualHost, service string, budget policy.Budget) (policy.Route, error) {
	out := policy.Route{Name: r.GetName()}
	m := r.GetMatch()
	switch ps := m.GetPathSpecifier().(type) {
	case *routev3.RouteMatch_Path:
		method, ok := strings.CutPrefix(ps.Path, "/"+service+"/")
		if !ok || method == "" || strings.Contains(method, "/") {
			return out, fmt.Errorf("path %q is not /%s/Method", ps.Path, service)
		}
		out.Match.Method = method
	case *routev3.RouteMatch_Prefix:
		if ps.Prefix != "" && ps.Prefix != "/" && ps.Prefix != "/"+service+"/" && ps.Prefix != "/"+service {
			// A prefix naming a whole method ("/Echo/Do") is that method;
			// Fleet matches methods exactly, not by partial names.
			return out, fmt.Errorf("prefix %q: Fleet matches the whole service (\"/%s/\") or one method by path", ps.Prefix, service)
		}
	case nil:
	default:
		return out, fmt.Errorf("path specifier %T is not supported (use path or prefix)", ps)
	}
	if cs := m.GetCaseSensitive(); cs != nil && !cs.GetValue() {
		return out, fmt.Errorf("case-insensitive matching is not supported")
	}
	for _, h := range m.GetHeaders() {
		hm, err := translateHeader(h)
		if err != nil {
			return out, err
		}
		out.Match.Headers = append(out.Match.Headers, hm)
	}
	if rf := m.GetRuntimeFraction(); rf != nil {
		p := percentOf(rf.GetDefaultValue())
		out.Match.Percent = &p
	}
	act, ok := r.GetAction().(*routev3.Route_Route)
	if !ok {
		return out, fmt.Errorf("action %T is not supported (use route)", r.GetAction())
	}
	ra := act.Route
	switch cs := ra.GetClusterSpecifier().(type) {
	case *routev3.RouteAction_Cluster:
		out.Destinations = []policy.Destination{{Subset: cs.Cluster, Weight: 100}}
	case *routev3.RouteAction_WeightedClusters:
		d, err := weights(cs.WeightedClusters.GetClusters())
		if err != nil {
			return out, err
		}
		out.Destinations = d
	default:
		return out, fmt.Errorf("cluster specifier %T is not supported (use cluster or weighted_clusters)", cs)
	}
	if t := ra.GetTimeout(); t != nil {
		out.Timeout = policy.Duration(t.AsDuration())
	}
	rp := ra.GetRetryPolicy()
	if rp == nil {
		rp = vh.GetRetryPolicy()
	}
	hp := ra.GetHedgePolicy()
	if hp == nil {
		hp = vh.GetHedgePolicy()
	}
	if rp != nil {
		attempts := 2 // Envoy's default num_retries is 1
		if n := rp.GetNumRetries(); n != nil {
			attempts = int(n.GetValue()) + 1
		}
		if hp != nil && hp.GetHedgeOnPerTryTimeout() {
			// Envoy sends another request at each per-try timeout without
			// cancelling the earlier ones: gRPC's hedging.
			d := rp.GetPerTryTimeout().AsDuration()
			if d <= 0 {
				return out, fmt.Errorf("hedge_on_per_try_timeout needs retry_policy.per_try_timeout")
			}
			out.Hedge = &policy.Hedge{Attempts: attempts, Delay: policy.Duration(d)}
		} else {
			codes, err := retryOn(rp.GetRetryOn())
			if err != nil {
				return out, err
			}
			out.Retry = &policy.Retry{Attempts: attempts, RetryOn: codes}
			if attempts > 1 {
				b := budget
				out.Retry.Budget = &b
			}
			if bo := rp.GetRetryBackOff(); bo != nil {
				out.Retry.Backoff = policy.Backoff{Base: policy.Duration(bo.GetBaseInterval().AsDuration()),
					Max: policy.Duration(bo.GetMaxInterval().AsDuration())}
				if out.Retry.Backoff.Max == 0 {
					out.Retry.Backoff.Max = 10 * out.Retry.Backoff.Base // Envoy's default
				}
			}
		}
	}
	for name, a := range r.GetTypedPerFilterConfig() {
		var hf faultv3.HTTPFault
		if a.MessageIs(&hf) {
			if err := a.UnmarshalTo(&hf); err != nil {
				return out, fmt.Errorf("filter config %s: %v", name, err)
			}
			f, err := translateFault(&hf)
			if err != nil {
				return out, fmt.Errorf("fault %s: %v", name, err)
			}
			out.Fault = f
		}
	}
	return out, nil
}

func translateHeader(h *routev3.HeaderMatcher) (policy.HeaderMatch, error) {
	hm := policy.HeaderMatch{Name: strings.ToLower(h.GetName()), Invert: h.GetInvertMatch()}
	switch s := h.GetHeaderMatchSpecifier().(type) {
	case *routev3.HeaderMatcher_ExactMatch:
		hm.Exact = s.ExactMatch
	case *routev3.HeaderMatcher_PrefixMatch:
		hm.Prefix = s.PrefixMatch
	case *routev3.HeaderMatcher_SafeRegexMatch:
		hm.Regex = s.SafeRegexMatch.GetRegex()
	case *routev3.HeaderMatcher_PresentMatch:
		hm.Present = s.PresentMatch
		if !s.PresentMatch {
			hm.Present, hm.Invert = true, !hm.Invert
		}
	case *routev3.HeaderMatcher_StringMatch:
		if s.StringMatch.GetIgnoreCase() {
			return hm, fmt.Errorf("header %s: ignore_case is not supported", hm.Name)
		}
		switch p := s.StringMatch.GetMatchPattern().(type) {
		case *matcherv3.StringMatcher_Exact:
			hm.Exact = p.Exact
		case *matcherv3.StringMatcher_Prefix:
			hm.Prefix = p.Prefix
		case *matcherv3.StringMatcher_SafeRegex:
			hm.Regex = p.SafeRegex.GetRegex()
		default:
			return hm, fmt.Errorf("header %s: string matcher %T is not supported", hm.Name, p)
		}
	default:
		return hm, fmt.Errorf("header %s: matcher %T is not supported (exact, prefix, safe_regex, present)", hm.Name, s)
	}
	if hm.Exact == "" && hm.Prefix == "" && hm.Regex == "" && !hm.Present {
		return hm, fmt.Errorf("header %s: empty matcher", hm.Name)
	}
	return hm, nil
}

// weights scales the clusters' weights to integers summing to 100 by the
// largest-remainder method.
func weights(cs []*routev3.WeightedCluster_ClusterWeight) ([]policy.Destination, error) {
	total := 0.0
	for _, c := range cs {
		if c.GetName() == "" {
			return nil, fmt.Errorf("weighted cluster without a name (cluster_header is not supported)")
		}
		total += float64(c.GetWeight().GetValue())
	}
	if total == 0 {
		return nil, fmt.Errorf("weighted clusters' weights sum to 0")
	}
	out := make([]policy.Destination, len(cs))
	rem := make([]float64, len(cs))
	sum := 0
	for i, c := range cs {
		exact := float64(c.GetWeight().GetValue()) * 100 / total
		out[i] = policy.Destination{Subset: c.GetName(), Weight: int(math.Floor(exact))}
		rem[i] = exact - math.Floor(exact)
		sum += out[i].Weight
	}
	for ; sum < 100; sum++ {
		best := 0
		for i := range rem {
			if rem[i] > rem[best] {
				best = i
			}
		}
		out[best].Weight++
		rem[best] = -1
	}
	return out, nil
}

// retryOn maps Envoy's gRPC retry conditions to fleet.Code names; other
// conditions (HTTP ones) are refused.
func retryOn(s string) ([]string, error) {
	var out []string
	for c := range strings.SplitSeq(s, ",") {
		c = strings.TrimSpace(c)
		switch c {
		case "":
		case "cancelled":
			out = append(out, fleet.Canceled.String())
		case "deadline-exceeded", "internal", "resource-exhausted", "unavailable":
			out = append(out, strings.ReplaceAll(c, "-", "_"))
		default:
			return nil, fmt.Errorf("retry_on %q is not supported (cancelled, deadline-exceeded, internal, resource-exhausted, unavailable)", c)
		}
	}
	return out, nil
}

func translateFault(hf *faultv3.HTTPFault) (*policy.Fault, error) {
	f := &policy.Fault{}
	if d := hf.GetDelay(); d != nil {
		fd, ok := d.GetFaultDelaySecifier().(*commonfault.FaultDelay_FixedDelay)
		if !ok {
			return nil, fmt.Errorf("delay: only fixed_delay is supported")
		}
		f.Delay = &policy.FaultDelay{Duration: policy.Duration(fd.FixedDelay.AsDuration()), Percent: percentOf(d.GetPercentage())}
	}
	if a := hf.GetAbort(); a != nil {
		var code fleet.Code
		switch e := a.GetErrorType().(type) {
		case *faultv3.FaultAbort_GrpcStatus:
			code = fleet.Code(e.GrpcStatus)
			if code == fleet.OK || code > fleet.Unauthenticated {
				return nil, fmt.Errorf("abort: grpc_status %d is not an error code", e.GrpcStatus)
			}
		case *faultv3.FaultAbort_HttpStatus:
			code = httpCode(e.HttpStatus)
		default:
			return nil, fmt.Errorf("abort: %T is not supported (grpc_status, http_status)", e)
		}
		f.Abort = &policy.FaultAbort{Code: code.String(), Percent: percentOf(a.GetPercentage())}
	}
	return f, nil
}

// httpCode maps an HTTP status to a code as gRPC does (its "HTTP to gRPC
// status code mapping").
func httpCode(s uint32) fleet.Code {
	switch s {
	case 400:
		return fleet.Internal
	case 401:
		return fleet.Unauthenticated
	case 403:
		return fleet.PermissionDenied
	case 404:
		return fleet.Unimplemented
	case 429, 502, 503, 504:
		return fleet.Unavailable
	}
	return fleet.Unknown
}

// percentOf returns a FractionalPercent as 0–100 (nil: Envoy's default,
// 100%). Values above 100% are returned as they are, for Compile to
// refuse.
func percentOf(p *typev3.FractionalPercent) float64 {
	if p == nil {
		return 100
	}
	den := 100.0
	switch p.GetDenominator() {
	case typev3.FractionalPercent_TEN_THOUSAND:
		den = 10_000
	case typev3.FractionalPercent_MILLION:
		den = 1_000_000
	}
	return float64(p.GetNumerator()) * 100 / den
}

// Instances turns a ClusterLoadAssignment into instances of service:
// each endpoint with a socket address, tagged ClusterTagPrefix+cluster,
// weighted by its load_balancing_weight; endpoints whose health status is
// UNHEALTHY or TIMEOUT are left out and DRAINING ones marked Draining.
// Endpoint metadata under filter_metadata "fleet" may set "network"
// (default network), "version" and "group". An address with port 0 is the
// host alone (an in-process listener's name, a Unix socket path).
func Instances(cla *endpointv3.ClusterLoadAssignment, service, network string) ([]registry.Instance, error) {
	var out []registry.Instance
	for _, loc := range cla.GetEndpoints() {
		for _, lb := range loc.GetLbEndpoints() {
			switch lb.GetHealthStatus() {
			case corev3.HealthStatus_UNHEALTHY, corev3.HealthStatus_TIMEOUT:
				continue
			}
			sa := lb.GetEndpoint().GetAddress().GetSocketAddress()
			if sa == nil || sa.GetAddress() == "" {
				return nil, fleet.Errorf(fleet.InvalidArgument, "xds: cluster %q: endpoint without a socket address", cla.GetClusterName())
			}
			in := registry.Instance{Service: service, Addr: sa.GetAddress(), Network: network,
				Weight: int(lb.GetLoadBalancingWeight().GetValue()), Tags: []string{ClusterTagPrefix + cla.GetClusterName()}}
			if p := sa.GetPortValue(); p != 0 {
				in.Addr = net.JoinHostPort(sa.GetAddress(), strconv.Itoa(int(p)))
			}
			if md := lb.GetMetadata().GetFilterMetadata()["fleet"]; md != nil {
				f := md.GetFields()
				if v := f["network"].GetStringValue(); v != "" {
					in.Network = v
				}
				in.Version = f["version"].GetStringValue()
				in.Group = f["group"].GetStringValue()
			}
			if lb.GetHealthStatus() == corev3.HealthStatus_DRAINING {
				in.State = registry.Draining
			}
			out = append(out, in)
		}
	}
	return out, nil
}
