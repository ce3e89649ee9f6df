package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/server/admin"
	"github.com/fleetrpc/fleet/server/reflection"
)

// apiInstance is one instance as the page shows it.
type apiInstance struct {
	Addr    string   `json:"addr"`
	Weight  int      `json:"weight"`
	Group   string   `json:"group"`
	Version string   `json:"version"`
	Tags    []string `json:"tags"`
	State   string   `json:"state"`
	// InFlight, CallsPerSecond and P99Ms are the record's registry.Load:
	// the load of the whole server (every service it serves), not of
	// this service alone; the page shows them per server (apiServer).
	InFlight       int64   `json:"inflight"`
	CallsPerSecond float64 `json:"calls_per_second"`
	P99Ms          float64 `json:"p99_ms"` // 0 without calls in the last interval
}

// Service states, as apiService.State names them.
const (
	serviceActive      = "active"       // at least one instance takes calls
	serviceAllDraining = "all_draining" // instances, all of them draining
	serviceNone        = "none"         // no instance registered
)

type apiService struct {
	Name      string        `json:"name"`
	State     string        `json:"state"`  // serviceActive, serviceAllDraining or serviceNone
	Active    int           `json:"active"` // instances not draining
	Instances []apiInstance `json:"instances"`
	Error     string        `json:"error,omitempty"`
	// Policy is the service's traffic policy in the registry's policy
	// store; absent when the registry has none (static://).
	Policy *apiPolicy `json:"policy,omitempty"`
}

// apiServer is one server's load: what it last reported and the samples
// the dashboard kept (one a second, at most historyWindow).
type apiServer struct {
	Addr           string     `json:"addr"`
	Services       []string   `json:"services"`
	InFlight       int64      `json:"inflight"`
	CallsPerSecond float64    `json:"calls_per_second"`
	P99Ms          float64    `json:"p99_ms"`
	History        []apiPoint `json:"history"` // oldest first
}

// apiPoint is one sample of a server's load.
type apiPoint struct {
	T              int64   `json:"t"` // Unix time, milliseconds
	CallsPerSecond float64 `json:"cps"`
	P99Ms          float64 `json:"p99"`
}

type apiServices struct {
	Registry      string       `json:"registry"`
	Services      []apiService `json:"services"`
	Servers       []apiServer  `json:"servers"`
	HistorySecond int          `json:"history_seconds"` // the charts' span
	Time          time.Time    `json:"time"`
	Error         string       `json:"error,omitempty"`        // listing the services failed
	PolicyStore   string       `json:"policy_store,omitempty"` // where the policies are, "" when nowhere
}

// registryError words a registry failure for the page.
func (d *dashboard) registryError(err error) string {
	s := "registry: " + err.Error()
	if d.f.registry == defaultDashboardRegistry {
		s += " (the default registry is fleet demo --serve's: is it running? Otherwise give --registry URL)"
	}
	return s
}

// serviceNames returns the services to show: the --service ones, or
// those the registry lists now (which also become the services the API
// accepts).
func (d *dashboard) serviceNames(ctx context.Context) ([]string, error) {
	if len(d.f.services) > 0 {
		return slices.Sorted(slices.Values(d.f.services)), nil
	}
	names, err := d.lister.Services(ctx)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.shared == nil {
		return nil, registry.ErrClosed
	}
	for _, n := range names {
		if d.targets[n] == nil {
			d.targets[n] = d.serviceTarget(n)
		}
	}
	for n := range d.targets {
		if !slices.Contains(names, n) {
			delete(d.targets, n) // shared: nothing to close
		}
	}
	return names, nil
}

// target returns a copy of svc's target for one request (the copy's
// close does nothing), or nil when svc is not shown. A service the
// registry lists since the last look is found by listing again.
func (d *dashboard) target(ctx context.Context, svc string) *target {
	get := func() *target {
		d.mu.Lock()
		defer d.mu.Unlock()
		if t := d.targets[svc]; t != nil {
			c := *t
			c.close = func() {}
			return &c
		}
		return nil
	}
	if t := get(); t != nil || len(d.f.services) > 0 || svc == "" {
		return t
	}
	if _, err := d.serviceNames(ctx); err != nil {
		return nil
	}
	return get()
}

// snapshot reads every shown service's instances from the registry now.
func (d *dashboard) snapshot(ctx context.Context) apiServices {
	out := apiServices{Registry: d.f.registry, Services: []apiService{}, Servers: []apiServer{},
		HistorySecond: int(historyWindow / time.Second), Time: time.Now().UTC()}
	names, err := d.serviceNames(ctx)
	if err != nil {
		out.Error = d.registryError(err)
		return out
	}
	// The services are asked at once, so that a registry that is down
	// costs one timeout, not one per service.
	lists := make([][]registry.Instance, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		t := d.target(ctx, n)
		if t == nil {
			errs[i] = registry.ErrClosed
			continue
		}
		wg.Go(func() { lists[i], errs[i] = t.disc.Instances(ctx, n) })
	}
	wg.Wait()
	servers := map[string]*apiServer{}
	var order []string
	for k, n := range names {
		s := apiService{Name: n, Instances: []apiInstance{}}
		if errs[k] != nil {
			s.Error = d.registryError(errs[k])
		}
		for _, in := range lists[k] {
			st := string(in.State)
			if st == "" {
				st = string(registry.Active)
			}
			if in.State != registry.Draining {
				s.Active++
			}
			s.Instances = append(s.Instances, apiInstance{
				Addr: in.Key(), Weight: in.EffectiveWeight(), Group: in.Group, Version: in.Version,
				Tags: append([]string{}, in.Tags...), State: st,
				InFlight: in.Load.InFlight, CallsPerSecond: in.Load.CallsPerSecond, P99Ms: in.Load.P99Ms,
			})
			sv := servers[in.Key()]
			if sv == nil {
				// Every record of a server carries the same process-wide
				// load (written by each Publish at its own tick): the
				// first one stands for the server.
				sv = &apiServer{Addr: in.Key(), InFlight: in.Load.InFlight, CallsPerSecond: in.Load.CallsPerSecond, P99Ms: in.Load.P99Ms}
				servers[in.Key()] = sv
				order = append(order, in.Key())
			}
			sv.Services = append(sv.Services, n)
		}
		switch {
		case s.Active > 0:
			s.State = serviceActive
		case len(s.Instances) > 0:
			s.State = serviceAllDraining
		default:
			s.State = serviceNone
		}
		out.Services = append(out.Services, s)
	}
	slices.Sort(order)
	for _, a := range order {
		out.Servers = append(out.Servers, *servers[a])
	}
	return out
}

// apiServices answers GET /api/services: every shown service's instances
// as the registry lists them now, and each server's load with the
// samples kept of it. A registry error is reported per service, or for
// the whole page when the services cannot be listed.
func (d *dashboard) apiServices(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	defer cancel()
	out := d.snapshot(ctx)
	for i := range out.Servers {
		out.Servers[i].History = d.hist.points(out.Servers[i].Addr)
	}
	if d.policies != nil && out.Error == "" {
		out.PolicyStore = d.policyStoreName()
		shown := make([]string, len(out.Services))
		for i := range out.Services {
			shown[i] = out.Services[i].Name
			out.Services[i].Policy = d.policyView(shown[i])
		}
		d.prunePolicies(shown)
	}
	writeJSON(w, http.StatusOK, out)
}

// allDraining returns an unavailable error naming the state when the
// registry lists instances of t's service and every one is draining:
// a call then has nowhere to go, though the page lists instances.
func allDraining(ctx context.Context, t *target) error {
	list, err := t.disc.Instances(ctx, t.service)
	if err != nil || len(list) == 0 {
		return nil
	}
	for _, in := range list {
		if in.State != registry.Draining {
			return nil
		}
	}
	return &callError{"registry " + t.raw, fleet.Errorf(fleet.Unavailable,
		"all %d instances of service %q are draining (disabled): enable one to call it", len(list), t.service)}
}

// apiMethods answers GET /api/methods?service=S with the methods of S as
// reflection on one instance lists them.
func (d *dashboard) apiMethods(w http.ResponseWriter, r *http.Request) {
	svc := r.URL.Query().Get("service")
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	t := d.target(ctx, svc)
	if t == nil {
		writeJSON(w, http.StatusNotFound, apiError(&callError{"methods", fleet.Errorf(fleet.NotFound, "service %q is not shown here", svc)}))
		return
	}
	if err := allDraining(ctx, t); err != nil {
		writeJSON(w, http.StatusBadGateway, apiError(err))
		return
	}
	var list reflection.ListReply
	if err := t.reflect(ctx, "List", &reflection.ListRequest{}, &list); err != nil {
		writeJSON(w, http.StatusBadGateway, apiError(err))
		return
	}
	for _, s := range list.Services {
		if s.Name == svc {
			writeJSON(w, http.StatusOK, map[string]any{"service": svc, "methods": s.Methods})
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"service": svc, "methods": []string{}})
}

// apiDescribeReply is a method's types and the JSON template of its
// argument, as fleet describe prints them.
type apiDescribeReply struct {
	Method   string          `json:"method"`
	Args     string          `json:"args"`  // the argument's type
	Reply    string          `json:"reply"` // the reply's type
	Template json.RawMessage `json:"template"`
}

// apiDescribe answers GET /api/describe?method=S.M with the argument's
// zero-value template (argsTemplate) from reflection on one instance.
func (d *dashboard) apiDescribe(w http.ResponseWriter, r *http.Request) {
	full := r.URL.Query().Get("method")
	svc, method, err := splitMethod(full)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, apiError(err))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	t := d.target(ctx, svc)
	if t == nil {
		writeJSON(w, http.StatusNotFound, apiError(&callError{"describe", fleet.Errorf(fleet.NotFound, "service %q is not shown here", svc)}))
		return
	}
	if err := allDraining(ctx, t); err != nil {
		writeJSON(w, http.StatusBadGateway, apiError(err))
		return
	}
	var rep reflection.DescribeReply
	if err := t.reflect(ctx, "Describe", &reflection.DescribeRequest{Service: svc, Method: method}, &rep); err != nil {
		if ce, ok := err.(*callError); ok && fleet.CodeOf(err) == fleet.NotFound {
			err = t.withSuggestion(ctx, full, svc, method, ce.err)
		}
		writeJSON(w, http.StatusBadGateway, apiError(err))
		return
	}
	if len(rep.Methods) != 1 {
		writeJSON(w, http.StatusBadGateway, apiError(&callError{full, fleet.Errorf(fleet.Internal, "reflection described %d methods", len(rep.Methods))}))
		return
	}
	m := rep.Methods[0]
	tmpl, err := argsTemplate(m.Args)
	if err != nil {
		writeJSON(w, http.StatusBadGateway, apiError(&callError{"reflection", fleet.WrapError(fleet.Internal, err)}))
		return
	}
	writeJSON(w, http.StatusOK, apiDescribeReply{Method: full, Args: typeName(m.Args), Reply: typeName(m.Reply), Template: tmpl})
}

type apiCallRequest struct {
	Method string         `json:"method"` // Service.Method
	Args   string         `json:"args"`   // JSON text as typed
	Codec  string         `json:"codec,omitempty"`
	Loose  bool           `json:"loose,omitempty"` // fleet call --loose: no field checks
	Meta   fleet.Metadata `json:"metadata,omitempty"`
}

type apiCallResponse struct {
	OK bool `json:"ok"`
	// Code is the Fleet code's name ("ok", "unavailable", ...); empty
	// for bad input, which never reached a server (exit status 2).
	Code   string `json:"code"`
	Status int    `json:"exit_status"` // fleet call's exit status for the same error
	// Message is the error; Text the line fleet call prints for it
	// ("fleet: " + Message).
	Message   string            `json:"message,omitempty"`
	Text      string            `json:"text,omitempty"`
	Reply     json.RawMessage   `json:"reply,omitempty"`
	Server    string            `json:"server,omitempty"`
	Codec     string            `json:"codec,omitempty"`
	ElapsedMs float64           `json:"elapsed_ms,omitempty"`
	Metadata  map[string]string `json:"metadata,omitempty"`
}

// apiError words err as fleet call does: its message, the line it
// prints and its exit status.
func apiError(err error) apiCallResponse {
	out := apiCallResponse{Code: fleet.CodeOf(err).String(), Status: exitStatus(err), Message: err.Error(), Text: "fleet: " + err.Error()}
	var ue *usageError
	if errors.As(err, &ue) {
		out.Code = ""
	}
	return out
}

// apiCall answers POST /api/call (JSON body, same origin): the call goes
// through the service's registry target as fleet call's would, with its
// field checks unless loose. Bad input and failed calls are answered
// with a JSON error, status 400 or 502.
func (d *dashboard) apiCall(w http.ResponseWriter, r *http.Request) {
	var req apiCallRequest
	if !readJSON(w, r, 4<<20, false, &req) {
		return
	}
	svc, _, err := splitMethod(req.Method)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, apiError(err))
		return
	}
	timeout := d.f.timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	t := d.target(ctx, svc)
	if t == nil {
		writeJSON(w, http.StatusBadRequest, apiError(usagef("service %q is not shown here", svc)))
		return
	}
	if req.Codec == "" {
		req.Codec = "auto"
	}
	args := strings.TrimSpace(req.Args)
	if args == "" {
		args = "{}"
	}
	if len(req.Meta) > 0 {
		ctx = fleet.WithOutgoingMetadata(ctx, req.Meta)
	}
	var res *callResult
	if err = allDraining(ctx, t); err == nil {
		res, err = doCallChecked(ctx, t, req.Codec, req.Method, []byte(args), req.Loose)
	}
	d.log.Info("fleet dashboard: call", "method", req.Method, "remote", r.RemoteAddr, "code", fleet.CodeOf(err).String())
	out := apiCallResponse{OK: err == nil, Code: fleet.CodeOf(err).String()}
	if res != nil {
		out.Server, out.Codec, out.Metadata = res.where, res.codec, res.md
		out.ElapsedMs = float64(res.elapsed.Microseconds()) / 1000
		out.Reply = res.reply
	}
	if err != nil {
		e := apiError(err)
		out.Code, out.Status, out.Message, out.Text = e.Code, e.Status, e.Message, e.Text
		status := http.StatusBadGateway
		if e.Status == exitUsage {
			status = http.StatusBadRequest
		}
		writeJSON(w, status, out)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

type apiSteerRequest struct {
	Service string `json:"service"`
	Addr    string `json:"addr"`             // the instance's Key, as /api/services lists it
	Weight  int    `json:"weight,omitempty"` // > 0: the new weight
	State   string `json:"state,omitempty"`  // "active" or "draining"
}

// apiSteer answers POST /api/steer (JSON body, same origin): it asks the
// instance, through its fleet.Admin service (servers that registered it with admin.Register),
// to change the weight or state of its record for the service; the
// server writes the record and clients follow through the registry. The
// address must be one the registry lists for the service.
func (d *dashboard) apiSteer(w http.ResponseWriter, r *http.Request) {
	var req apiSteerRequest
	if !readJSON(w, r, 64<<10, false, &req) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	t := d.target(ctx, req.Service)
	if t == nil {
		writeJSON(w, http.StatusBadRequest, apiError(usagef("service %q is not shown here", req.Service)))
		return
	}
	list, err := t.disc.Instances(ctx, req.Service)
	if err != nil {
		writeJSON(w, http.StatusBadGateway, apiError(&callError{"registry", fleet.WrapError(fleet.Unavailable, err)}))
		return
	}
	i := slices.IndexFunc(list, func(in registry.Instance) bool { return in.Key() == req.Addr })
	if i < 0 {
		writeJSON(w, http.StatusBadRequest, apiError(usagef("%s is not an instance of %s in the registry", req.Addr, req.Service)))
		return
	}
	in := list[i]
	network := in.Network
	if network == "" {
		network = "tcp"
	}
	c, err := client.Dial(ctx, network, in.Addr, append([]client.Option{client.WithHeartbeat(0)}, t.opts...)...)
	var pub admin.Published
	if err == nil {
		err = c.Call(ctx, admin.Service, "Steer", &admin.SteerRequest{Service: req.Service, Weight: req.Weight, State: registry.State(req.State)}, &pub)
		c.Close()
	}
	d.log.Info("fleet dashboard: steer", "service", req.Service, "addr", req.Addr, "weight", req.Weight, "state", req.State,
		"remote", r.RemoteAddr, "code", fleet.CodeOf(err).String())
	if err != nil {
		if isNoAdmin(err) {
			err = fleet.Errorf(fleet.Unimplemented, "%s does not serve %s (see admin.Register)", req.Addr, admin.Service)
		}
		writeJSON(w, http.StatusBadGateway, apiError(&callError{"steer " + req.Addr, err}))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "instances": pub.Instances})
}

func isNoAdmin(err error) bool {
	var fe *fleet.Error
	return errors.As(err, &fe) && fe.Code() == fleet.NotFound && strings.Contains(fe.Message(), fmt.Sprintf("%q", admin.Service))
}

// readJSON decodes the body of a state-changing request into v: the body
// must be application/json (else 415) of at most limit bytes holding one
// JSON value (else 400), with no field v lacks when strict. On failure it
// has answered the request and reports false.
func readJSON(w http.ResponseWriter, r *http.Request, limit int64, strict bool, v any) bool {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		writeJSON(w, http.StatusUnsupportedMediaType, apiError(usagef("the body must be application/json")))
		return false
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, limit))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		writeJSON(w, http.StatusBadRequest, apiError(usagef("request body: %v", err)))
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
