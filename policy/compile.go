package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"sigs.k8s.io/yaml"
)

// ValidationError lists every problem Compile found in a Document, each
// with its path ("routes[1].destinations: weights sum to 90, want 100").
// Compile returns it wrapped in a *fleet.Error with code InvalidArgument;
// errors.As finds it.
type ValidationError struct {
	Problems []string
}

func (e *ValidationError) Error() string {
	return "invalid policy: " + strings.Join(e.Problems, "; ")
}

// Parse decodes a policy document, JSON (when it starts with '{') or
// YAML, strictly (an unknown field is an error), and compiles it. Errors
// have code InvalidArgument.
func Parse(data []byte) (*Policy, error) {
	doc, err := Decode(data)
	if err != nil {
		return nil, err
	}
	return Compile(doc)
}

// Decode decodes a document, JSON or YAML, strictly, without checking it.
// Errors have code InvalidArgument.
func Decode(data []byte) (*Document, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, fleet.NewError(fleet.InvalidArgument, "policy: empty document")
	}
	if trimmed[0] != '{' {
		j, err := yaml.YAMLToJSONStrict(trimmed)
		if err != nil {
			return nil, fleet.Errorf(fleet.InvalidArgument, "policy: bad YAML: %w", err)
		}
		trimmed = j
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	var doc Document
	if err := dec.Decode(&doc); err != nil {
		return nil, fleet.Errorf(fleet.InvalidArgument, "policy: bad document: %w", err)
	}
	if dec.More() {
		return nil, fleet.NewError(fleet.InvalidArgument, "policy: trailing data after the document")
	}
	return &doc, nil
}

// JSON encodes d as indented JSON.
func (d *Document) JSON() ([]byte, error) { return json.MarshalIndent(d, "", "  ") }

// YAML encodes d as YAML with the same field names as its JSON.
func (d *Document) YAML() ([]byte, error) { return yaml.Marshal(d) }

// Policy is a compiled, checked Document: regular expressions compiled,
// codes resolved, retry budgets made. It is immutable and safe for
// concurrent use; the budgets it holds count the calls of every client
// that applies this Policy value.
type Policy struct {
	doc     *Document
	subsets map[string]Subset
	routes  []route
	limits  map[string]MethodLimit
}

type route struct {
	name    string
	method  string
	headers []headerMatch
	percent float64 // <0: not set
	dests   []Destination
	total   int
	timeout time.Duration
	retry   *client.RetryPolicy
	hedge   *client.HedgePolicy
	fault   func(context.Context) error
	breaker *client.BreakerSettings
}

type headerMatch struct {
	HeaderMatch
	re *regexp.Regexp
}

// faultFunc returns the function that injects a route's faults before an
// attempt: a delay drawn with delayPct percent, then an abort drawn
// independently with abortPct percent.
func faultFunc(delay time.Duration, delayPct float64, abort error, abortPct float64) func(context.Context) error {
	return func(ctx context.Context) error {
		if delay > 0 && chance(delayPct) {
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return fleet.FromContextError(ctx.Err())
			}
		}
		if abort != nil && chance(abortPct) {
			return abort
		}
		return nil
	}
}

// chance reports true with probability pct/100.
func chance(pct float64) bool { return pct >= 100 || (pct > 0 && rand.Float64()*100 < pct) }

// Document returns the document the Policy was compiled from; the caller
// must not change it.
func (p *Policy) Document() *Document { return p.doc }

// Version returns the document's Version.
func (p *Policy) Version() string { return p.doc.Version }

// Service returns the document's Service.
func (p *Policy) Service() string { return p.doc.Service }

// Limits returns the per-method limits by method name.
func (p *Policy) Limits() map[string]MethodLimit { return p.limits }

// Compile checks doc and returns its compiled Policy, or a *fleet.Error
// with code InvalidArgument wrapping a *ValidationError that lists every
// problem: a missing version or service, an unknown API version, duplicate
// or unknown subsets, destination weights that do not sum to 100,
// percentages outside 0–100, a regular expression that does not compile,
// a header matcher without exactly one condition, an unknown code, a
// retry policy without a budget, hedging together with retries, breaker
// thresholds out of range, negative durations and limits. doc is not retained after Compile copies it.
func Compile(doc *Document) (*Policy, error) {
	var probs []string
	bad := func(path, format string, args ...any) {
		probs = append(probs, path+": "+fmt.Sprintf(format, args...))
	}
	d := cloneDocument(doc)
	p := &Policy{doc: d, subsets: map[string]Subset{}, limits: map[string]MethodLimit{}}
	if d.APIVersion != "" && d.APIVersion != APIVersion {
		bad("apiVersion", "unknown %q, want %q", d.APIVersion, APIVersion)
	}
	if d.Version == "" {
		bad("version", "missing")
	}
	if d.Service == "" {
		bad("service", "missing")
	}
	for i, s := range d.Subsets {
		path := fmt.Sprintf("subsets[%d]", i)
		if s.Name == "" {
			bad(path+".name", "missing")
			continue
		}
		if _, dup := p.subsets[s.Name]; dup {
			bad(path+".name", "duplicate subset %q", s.Name)
		}
		p.subsets[s.Name] = s
	}
	for i, r := range d.Routes {
		path := fmt.Sprintf("routes[%d]", i)
		if r.Name != "" {
			path = fmt.Sprintf("routes[%d](%s)", i, r.Name)
		}
		name := r.Name
		if name == "" {
			name = fmt.Sprintf("#%d", i)
		}
		cr := route{name: name, method: r.Match.Method, percent: -1, dests: r.Destinations, timeout: r.Timeout.D()}
		if r.Match.Percent != nil {
			cr.percent = *r.Match.Percent
			checkPercent(bad, path+".match.percent", cr.percent)
		}
		for j, h := range r.Match.Headers {
			hp := fmt.Sprintf("%s.match.headers[%d]", path, j)
			hm := headerMatch{HeaderMatch: h}
			if h.Name == "" {
				bad(hp+".name", "missing")
			}
			n := 0
			for _, set := range []bool{h.Exact != "", h.Prefix != "", h.Regex != "", h.Present} {
				if set {
					n++
				}
			}
			if n != 1 {
				bad(hp, "want exactly one of exact, prefix, regex, present; got %d", n)
			}
			if h.Regex != "" {
				re, err := regexp.Compile(`^(?:` + h.Regex + `)$`)
				if err != nil {
					bad(hp+".regex", "%v", err)
				}
				hm.re = re
			}
			cr.headers = append(cr.headers, hm)
		}
		for j, dst := range r.Destinations {
			dp := fmt.Sprintf("%s.destinations[%d]", path, j)
			if _, ok := p.subsets[dst.Subset]; !ok {
				bad(dp+".subset", "unknown subset %q", dst.Subset)
			}
			if dst.Weight < 0 || dst.Weight > 100 {
				bad(dp+".weight", "%d is outside 0–100", dst.Weight)
			}
			cr.total += dst.Weight
		}
		if len(r.Destinations) > 0 && cr.total != 100 {
			bad(path+".destinations", "weights sum to %d, want 100", cr.total)
		}
		if r.Timeout < 0 {
			bad(path+".timeout", "negative")
		}
		if r.Retry != nil && r.Hedge != nil {
			bad(path, "retry and hedge are exclusive")
		}
		if rt := r.Retry; rt != nil {
			cr.retry = compileRetry(bad, path+".retry", rt)
		}
		if h := r.Hedge; h != nil {
			if h.Attempts < 2 || h.Attempts > 5 {
				bad(path+".hedge.attempts", "%d is outside 2–5", h.Attempts)
			}
			if h.Delay <= 0 {
				bad(path+".hedge.delay", "must be positive")
			}
			cr.hedge = &client.HedgePolicy{MaxAttempts: h.Attempts, Delay: h.Delay.D()}
		}
		if f := r.Fault; f != nil {
			var (
				delay, abortPct, delayPct = time.Duration(0), 0.0, 0.0
				abort                     error
			)
			if f.Delay != nil {
				checkPercent(bad, path+".fault.delay.percent", f.Delay.Percent)
				if f.Delay.Duration <= 0 {
					bad(path+".fault.delay.duration", "must be positive")
				}
				delay, delayPct = f.Delay.Duration.D(), f.Delay.Percent
			}
			if f.Abort != nil {
				checkPercent(bad, path+".fault.abort.percent", f.Abort.Percent)
				code, ok := parseCode(f.Abort.Code)
				if !ok || code == fleet.OK {
					bad(path+".fault.abort.code", "unknown or OK code %q", f.Abort.Code)
				}
				abort = fleet.Errorf(code, "fault injected by policy %s, route %d", d.Version, i)
				abortPct = f.Abort.Percent
			}
			if f.Delay == nil && f.Abort == nil {
				bad(path+".fault", "neither delay nor abort")
			}
			cr.fault = faultFunc(delay, delayPct, abort, abortPct)
		}
		if b := r.Breaker; b != nil {
			cr.breaker = compileBreaker(bad, path+".breaker", b)
		}
		p.routes = append(p.routes, cr)
	}
	for i, l := range d.Limits {
		path := fmt.Sprintf("limits[%d]", i)
		if l.Method == "" {
			bad(path+".method", "missing")
		}
		if _, dup := p.limits[l.Method]; dup {
			bad(path+".method", "duplicate method %q", l.Method)
		}
		if l.Rate < 0 || l.Burst < 0 || l.MaxConcurrent < 0 {
			bad(path, "negative limit")
		}
		p.limits[l.Method] = l
	}
	if len(probs) > 0 {
		return nil, fleet.WrapError(fleet.InvalidArgument, &ValidationError{Problems: probs})
	}
	return p, nil
}

func compileRetry(bad func(string, string, ...any), path string, rt *Retry) *client.RetryPolicy {
	cp := &client.RetryPolicy{MaxAttempts: rt.Attempts, BackoffBase: rt.Backoff.Base.D(), BackoffMax: rt.Backoff.Max.D()}
	if rt.Attempts < 1 || rt.Attempts > 10 {
		bad(path+".attempts", "%d is outside 1–10", rt.Attempts)
	}
	for k, name := range rt.RetryOn {
		code, ok := parseCode(name)
		if !ok || code == fleet.OK {
			bad(fmt.Sprintf("%s.retryOn[%d]", path, k), "unknown or OK code %q", name)
		}
		cp.Codes = append(cp.Codes, code)
	}
	if rt.Backoff.Base < 0 || rt.Backoff.Max < rt.Backoff.Base {
		bad(path+".backoff", "want 0 <= base <= max")
	}
	if rt.Budget == nil {
		if rt.Attempts > 1 {
			bad(path+".budget", "missing: a retry policy needs a budget")
		}
		return cp
	}
	checkPercent(bad, path+".budget.percent", rt.Budget.Percent)
	minimum := 10
	if rt.Budget.MinRetries != nil {
		minimum = *rt.Budget.MinRetries
		if minimum < 0 {
			bad(path+".budget.minRetries", "negative")
		}
	}
	if rt.Budget.Window < 0 {
		bad(path+".budget.window", "negative")
	}
	cp.Budget = client.NewRetryBudget(rt.Budget.Percent/100, minimum, rt.Budget.Window.D())
	return cp
}

// maxBreakerWait bounds a breaker's OpenFor and ResetEvery.
const maxBreakerWait = Duration(time.Hour)

func compileBreaker(bad func(string, string, ...any), path string, b *Breaker) *client.BreakerSettings {
	if b.Failures < 0 || b.Failures > 1000 {
		bad(path+".failures", "%d is outside 0–1000", b.Failures)
	}
	if b.Probes < 0 || b.Probes > 100 {
		bad(path+".probes", "%d is outside 0–100", b.Probes)
	}
	if b.OpenFor < 0 || b.OpenFor > maxBreakerWait {
		bad(path+".openFor", "%v is outside 0–1h", b.OpenFor.D())
	}
	if b.ResetEvery < 0 || b.ResetEvery > maxBreakerWait {
		bad(path+".resetEvery", "%v is outside 0–1h", b.ResetEvery.D())
	}
	set := b.Failures != 0 || b.Probes != 0 || b.OpenFor != 0 || b.ResetEvery != 0
	if b.Disabled && set {
		bad(path, "disabled together with thresholds")
	}
	if !b.Disabled && !set {
		bad(path, "neither thresholds nor disabled")
	}
	return &client.BreakerSettings{Failures: uint32(max(b.Failures, 0)), Probes: uint32(max(b.Probes, 0)),
		OpenFor: b.OpenFor.D(), ResetEvery: b.ResetEvery.D(), Disabled: b.Disabled}
}

func checkPercent(bad func(string, string, ...any), path string, v float64) {
	if !(v >= 0 && v <= 100) {
		bad(path, "%v is outside 0–100", v)
	}
}

// parseCode maps a fleet.Code name ("unavailable") to its Code.
func parseCode(name string) (fleet.Code, bool) {
	for c := fleet.OK; c <= fleet.ShuttingDown; c++ {
		if c.String() == name {
			return c, true
		}
	}
	return 0, false
}

// cloneDocument deep-copies the parts of doc a Policy keeps.
func cloneDocument(doc *Document) *Document {
	b, err := json.Marshal(doc)
	if err != nil {
		d := *doc
		return &d
	}
	var d Document
	if err := json.Unmarshal(b, &d); err != nil {
		d = *doc
	}
	return &d
}

// ErrNoPolicy is returned by Memory's and File's Get when the service has
// no policy document. It has code NotFound, as the registries' stores'
// errors for a missing document do: test with fleet.CodeOf.
var ErrNoPolicy = fleet.NewError(fleet.NotFound, "policy: no policy document for the service")
