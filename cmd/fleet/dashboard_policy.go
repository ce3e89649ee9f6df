package main

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/policy"
)

// apiPolicy is a service's traffic policy as the page shows it: the
// document in force as a policy.Watcher on the dashboard's store sees it
// (the one every client and server following that store runs once it has
// caught up), and that watcher's status.
type apiPolicy struct {
	// Version is the version in force, "" when no policy is (the
	// clients' code defaults apply).
	Version string `json:"version"`
	// Document is the document in force, null when none.
	Document *policy.Document `json:"document"`
	// Applied and Refused count the documents the dashboard's watcher
	// applied and refused since it started; LastError is the last refusal.
	Applied   int64  `json:"applied"`
	Refused   int64  `json:"refused"`
	LastError string `json:"last_error,omitempty"`
	// Refusing is why the newest stored document was refused ("" when
	// the newest one is in force): clients keep Version meanwhile.
	Refusing string `json:"refusing,omitempty"`
	// Error is why the store could not be watched (retried at each poll).
	Error string `json:"error,omitempty"`
}

// policyWatch is the dashboard's watcher of one service's policy, and
// the outcome of the newest document it was given (its Observer).
type policyWatch struct {
	w        *policy.Watcher
	mu       sync.Mutex
	refusing string
}

func (p *policyWatch) Applied(string, string) { p.mu.Lock(); p.refusing = ""; p.mu.Unlock() }
func (p *policyWatch) Refused(_ string, err error) {
	p.mu.Lock()
	p.refusing = err.Error()
	p.mu.Unlock()
}

// openPolicies opens the policy store of the dashboard's
// registry (policy.Store of etcd, ZooKeeper, Redis or NATS); a static://
// registry has none, and the page then shows no policies.
func (d *dashboard) openPolicies() error {
	if d.shared == nil {
		return nil
	}
	timeout := d.f.timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	s, closeStore, err := openPolicyStore(d.base, timeout)
	if err != nil {
		return err
	}
	d.policies, d.closePolicies = s, closeStore
	return nil
}

// policyView returns svc's policy as the dashboard's watcher sees it,
// starting the watcher on first use; nil without a policy store.
func (d *dashboard) policyView(svc string) *apiPolicy {
	if d.policies == nil {
		return nil
	}
	d.mu.Lock()
	pw := d.watchers[svc]
	closed := d.watchers == nil
	d.mu.Unlock()
	if closed {
		return &apiPolicy{Error: "dashboard closed"}
	}
	if pw == nil {
		pw = &policyWatch{}
		w, err := policy.NewWatcher(d.policies, svc, policy.WatcherConfig{Logger: d.log, Observer: pw})
		if err != nil {
			return &apiPolicy{Error: err.Error()}
		}
		pw.w = w
		d.mu.Lock()
		switch {
		case d.watchers == nil:
			defer w.Close()
		case d.watchers[svc] != nil: // another request started one meanwhile
			defer w.Close()
			pw = d.watchers[svc]
		default:
			d.watchers[svc] = pw
		}
		d.mu.Unlock()
	}
	st := pw.w.Stats()
	out := &apiPolicy{Version: st.Version, Applied: st.Applied, Refused: st.Refused, LastError: st.LastError}
	if p := pw.w.Current(); p != nil {
		out.Version, out.Document = p.Version(), p.Document()
	}
	pw.mu.Lock()
	out.Refusing = pw.refusing
	pw.mu.Unlock()
	return out
}

// prunePolicies stops the watchers of services no longer shown.
func (d *dashboard) prunePolicies(shown []string) {
	d.mu.Lock()
	var gone []*policyWatch
	for svc, pw := range d.watchers {
		if !slices.Contains(shown, svc) {
			gone = append(gone, pw)
			delete(d.watchers, svc)
		}
	}
	d.mu.Unlock()
	for _, pw := range gone {
		pw.w.Close()
	}
}

// closePolicyWatchers stops every watcher and closes the store.
func (d *dashboard) closePolicyWatchers() {
	d.mu.Lock()
	ws := d.watchers
	d.watchers = nil
	d.mu.Unlock()
	for _, pw := range ws {
		pw.w.Close()
	}
	if d.closePolicies != nil {
		d.closePolicies()
		d.closePolicies, d.policies = nil, nil
	}
}

// apiPolicyEdit is a change to a service's stored policy: either a
// route's split (Route and Destinations) or the whole document (Document).
type apiPolicyEdit struct {
	Service string `json:"service"`
	// BaseVersion is the version the page showed; the edit is refused
	// (409, aborted) when the stored document has another one, so that
	// an edit never silently undoes one made meanwhile.
	BaseVersion string `json:"base_version"`
	// Route is the index of the route in the document's routes, and
	// Destinations its new weights: the same subsets in the same order.
	Route        *int                 `json:"route,omitempty"`
	Destinations []policy.Destination `json:"destinations,omitempty"`
	// Document is the whole new document, JSON or YAML.
	Document string `json:"document,omitempty"`
}

// apiPolicyResult answers a good edit.
type apiPolicyResult struct {
	OK       bool             `json:"ok"`
	Previous string           `json:"previous"` // the version replaced, "" when none
	Version  string           `json:"version"`  // the version written
	Document *policy.Document `json:"document"`
}

// apiPolicyError is apiCallResponse's error form, with the validation
// problems listed one by one when the document was invalid.
type apiPolicyError struct {
	apiCallResponse
	Problems []string `json:"problems,omitempty"`
}

// apiPolicySet answers POST /api/policy (JSON body, same origin): it
// reads the service's stored document, applies the edit, gives the
// result the next version (nextVersion of the stored one, unless a whole
// document names a version of its own), checks it with policy.Parse, and
// only then writes it to the store, where every watcher of the service
// picks it up. An invalid result writes nothing: 400 with the problems.
// The check of BaseVersion and the write are two registry requests, not
// one transaction.
func (d *dashboard) apiPolicySet(w http.ResponseWriter, r *http.Request) {
	fail := func(status int, err error) {
		out := apiPolicyError{apiCallResponse: apiError(err)}
		var ve *policy.ValidationError
		if errors.As(err, &ve) {
			out.Problems = ve.Problems
		}
		writeJSON(w, status, out)
	}
	var req apiPolicyEdit
	if !readJSON(w, r, 1<<20, true, &req) {
		return
	}
	if d.policies == nil {
		fail(http.StatusBadRequest, usagef("registry %s holds no policies (a static list)", d.f.registry))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	if d.target(ctx, req.Service) == nil {
		fail(http.StatusBadRequest, usagef("service %q is not shown here", req.Service))
		return
	}
	if (req.Route != nil) == (req.Document != "") {
		fail(http.StatusBadRequest, usagef("give either route and destinations, or document"))
		return
	}
	raw, err := d.policies.Get(ctx, req.Service)
	var stored *policy.Document
	switch {
	case fleet.CodeOf(err) == fleet.NotFound:
	case err != nil:
		fail(http.StatusBadGateway, &callError{"policy store", err})
		return
	default:
		if stored, err = policy.Decode(raw); err != nil && req.Document == "" {
			fail(http.StatusConflict, fleet.Errorf(fleet.FailedPrecondition,
				"the stored policy of %s does not decode (%v): replace the whole document", req.Service, err))
			return
		}
	}
	prev := ""
	if stored != nil {
		prev = stored.Version
		if prev != req.BaseVersion {
			fail(http.StatusConflict, fleet.Errorf(fleet.Aborted,
				"the policy of %s changed meanwhile: version %q is stored, the page showed %q; reload and edit again", req.Service, prev, req.BaseVersion))
			return
		}
	}
	var doc *policy.Document
	if req.Document != "" {
		if doc, err = policy.Decode([]byte(req.Document)); err != nil {
			fail(http.StatusBadRequest, err)
			return
		}
		if doc.Version == "" || doc.Version == prev {
			doc.Version = nextVersion(prev)
		}
	} else {
		if stored == nil {
			fail(http.StatusConflict, fleet.Errorf(fleet.FailedPrecondition, "%s has no policy to edit", req.Service))
			return
		}
		if doc, err = editSplit(stored, *req.Route, req.Destinations); err != nil {
			fail(http.StatusBadRequest, err)
			return
		}
		doc.Version = nextVersion(prev)
	}
	if doc.Service != req.Service {
		fail(http.StatusBadRequest, fleet.Errorf(fleet.InvalidArgument, "the document is a policy for service %q, not %q", doc.Service, req.Service))
		return
	}
	out, err := doc.JSON()
	if err == nil {
		_, err = policy.Parse(out)
	}
	if err != nil {
		d.log.Info("fleet dashboard: policy refused", "service", req.Service, "remote", r.RemoteAddr, "error", err)
		fail(http.StatusBadRequest, err)
		return
	}
	if err := d.policies.Put(ctx, req.Service, out); err != nil {
		fail(http.StatusBadGateway, &callError{"policy store", err})
		return
	}
	d.log.Info("fleet dashboard: policy", "service", req.Service, "previous", prev, "version", doc.Version, "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, apiPolicyResult{OK: true, Previous: prev, Version: doc.Version, Document: doc})
}

// editSplit returns a copy of doc whose route i has the weights of
// dests, which must name the route's subsets in its order.
func editSplit(doc *policy.Document, i int, dests []policy.Destination) (*policy.Document, error) {
	if i < 0 || i >= len(doc.Routes) {
		return nil, fleet.Errorf(fleet.InvalidArgument, "route %d: the policy has %d routes", i, len(doc.Routes))
	}
	// A deep enough copy: the routes slice and the edited route's
	// destinations are new, the rest is shared read-only.
	out := *doc
	out.Routes = slices.Clone(doc.Routes)
	rt := &out.Routes[i]
	if len(dests) != len(rt.Destinations) {
		return nil, fleet.Errorf(fleet.InvalidArgument, "routes[%d]: %d destinations given, the route has %d (edit the document to add or remove one)",
			i, len(dests), len(rt.Destinations))
	}
	rt.Destinations = slices.Clone(rt.Destinations)
	for k, dst := range dests {
		if dst.Subset != rt.Destinations[k].Subset {
			return nil, fleet.Errorf(fleet.InvalidArgument, "routes[%d].destinations[%d]: subset %q given, the route has %q",
				i, k, dst.Subset, rt.Destinations[k].Subset)
		}
		rt.Destinations[k].Weight = dst.Weight
	}
	return &out, nil
}

// nextVersion is the version an edit writes after v: v's trailing decimal
// number plus one ("41" → "42", "canary-9" → "canary-10"), else v with
// "-1" appended ("canary" → "canary-1"), "1" after none.
func nextVersion(v string) string {
	end := len(v)
	start := end
	for start > 0 && v[start-1] >= '0' && v[start-1] <= '9' {
		start--
	}
	if start == end {
		if v == "" {
			return "1"
		}
		return v + "-1"
	}
	digits := []byte(v[start:])
	k := len(digits) - 1
	for ; k >= 0 && digits[k] == '9'; k-- {
		digits[k] = '0'
	}
	if k < 0 {
		digits = append([]byte{'1'}, digits...)
	} else {
		digits[k]++
	}
	return v[:start] + string(digits)
}

// policyStoreName words where the dashboard's policies live, for the page.
func (d *dashboard) policyStoreName() string {
	if d.policies == nil {
		return ""
	}
	return strings.SplitN(d.base, "://", 2)[0] + " registry " + d.base
}
