package main

import (
	"context"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/server/admin"
	"github.com/fleetrpc/fleet/server/reflection"
)

//go:embed dashboard
var dashboardAssets embed.FS

type dashboardFlags struct {
	connFlags
	registry string
	services []string
	listen   string
	hosts    []string // --allow-host
}

func init() {
	rootCmd.AddCommand(newDashboardCmd())
}

func newDashboardCmd() *cobra.Command {
	var f dashboardFlags
	cmd := &cobra.Command{
		Use:   "dashboard [--registry URL] [--service NAME]...",
		Short: "A web page showing a registry's services and instances, with a call form",
		Long: `dashboard serves a web page (assets embedded, nothing from a CDN) that shows
every instance of the --service services in the --registry registry (by
default etcd://127.0.0.1:2379, where fleet demo --serve listens its embedded
etcd): address,
weight, group, version, tags, state and the load each last reported (calls/s,
in flight, p99 handling time), with charts of calls/s and p99 per instance
updated every second; and a
form that calls any method of those services with a JSON argument, as
fleet call does (reflection, protojson for protobuf methods).

Safety: it listens on 127.0.0.1 by default; any other address requires
--token, which the browser then presents once as /?token=... (kept in an
HttpOnly, SameSite=Strict cookie) and scripts as "Authorization: Bearer ...".
POST requests (the call form) must be same-origin (Go's
http.CrossOriginProtection, Sec-Fetch-Site / Origin) and JSON. Every
request must name the page's host as an IP address, localhost or an
--allow-host name (DNS rebinding is refused with 403). The token sent to
the servers (fleet.Admin of fleet demo --serve needs one) is --token, else
$FLEET_TOKEN, else --token-file, by default the file where fleet demo
--serve writes its admin token.`,
		Example: "  fleet dashboard --registry etcd://127.0.0.1:2379 --service Arith --service Hello",
		Args:    rangeArgs(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := newDashboard(&f)
			if err != nil {
				return err
			}
			defer d.close()
			lis, err := net.Listen("tcp", f.listen)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "dashboard on http://%s/ (registry %s; services %s)\n", lis.Addr(), f.registry, strings.Join(f.services, ", "))
			hs := newDashboardServer(d.handler())
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			go func() {
				<-ctx.Done()
				sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				hs.Shutdown(sctx)
			}()
			if err := hs.Serve(lis); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	cmd.SetFlagErrorFunc(flagError)
	fl := cmd.Flags()
	f.register(fl)
	fl.StringVar(&f.registry, "registry", defaultDashboardRegistry, "registry URL (default: the embedded etcd of fleet demo --serve): etcd://, zookeeper://, redis://, nats://host:port, or static://host:port,host:port")
	fl.StringArrayVar(&f.services, "service", []string{"Arith", "Hello"}, "a service to show (repeatable)")
	fl.StringVar(&f.listen, "listen", "127.0.0.1:8090", "address to serve the page on; not loopback only with --token")
	fl.StringArrayVar(&f.hosts, "allow-host", nil, "a host name the page may be reached by, besides IP addresses and localhost (repeatable); requests naming any other host are refused, against DNS rebinding")
	return cmd
}

// defaultDashboardRegistry is --registry's default: the embedded etcd of
// fleet demo --serve.
const defaultDashboardRegistry = "etcd://" + defaultRegistryAddr

// dashboard serves the page and its JSON API for one registry.
type dashboard struct {
	f       *dashboardFlags
	targets map[string]*target // by service
	log     *slog.Logger
}

// newDashboard opens one target per service (sharing nothing: each has
// its own discovery, as fleet call would).
func newDashboard(f *dashboardFlags) (*dashboard, error) {
	if f.registry == "" {
		return nil, usagef("dashboard: --registry is required")
	}
	if len(f.services) == 0 {
		return nil, usagef("dashboard: give at least one --service")
	}
	if !loopbackAddr(f.listen) && f.token == "" {
		return nil, usagef("dashboard: --listen %s is not a loopback address: give --token too", f.listen)
	}
	if f.failMode == "" {
		f.failMode = "failover"
	}
	if f.selector == "" {
		f.selector = "p2c"
	}
	d := &dashboard{f: f, targets: map[string]*target{}, log: slog.New(slog.NewTextHandler(os.Stderr, nil))}
	base := strings.TrimSuffix(f.registry, "/")
	for _, svc := range f.services {
		if svc == "" || strings.ContainsAny(svc, "/?#") {
			d.close()
			return nil, usagef("dashboard: bad service name %q", svc)
		}
		t, err := openTarget(base+"/"+url.PathEscape(svc), &f.connFlags)
		if err != nil {
			d.close()
			return nil, err
		}
		d.targets[svc] = t
	}
	return d, nil
}

func (d *dashboard) close() {
	for _, t := range d.targets {
		t.close()
	}
}

// loopbackAddr reports whether host:port names a loopback address
// ("localhost" included); an empty host (all interfaces) is not.
func loopbackAddr(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

const dashboardCookie = "fleet_dashboard_token"

// handler returns the page and the API behind the token check and the
// cross-origin protection.
func (d *dashboard) handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(dashboardAssets, "dashboard")
	mux.Handle("GET /", http.FileServerFS(static))
	mux.HandleFunc("GET /api/services", d.apiServices)
	mux.HandleFunc("GET /api/methods", d.apiMethods)
	mux.HandleFunc("POST /api/call", d.apiCall)
	mux.HandleFunc("POST /api/steer", d.apiSteer)
	var h http.Handler = mux
	h = http.NewCrossOriginProtection().Handler(h)
	h = d.checkToken(h)
	h = checkHost(d.f.hosts, h)
	return securityHeaders(h)
}

// newDashboardServer is the dashboard's HTTP server: headers within 10 s
// (at most 64 KiB), the whole request within 20 s (bodies are small JSON),
// the response within 60 s (a call from the form is bounded by
// --timeout), idle keep-alive connections closed after 2 minutes.
func newDashboardServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       20 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
}

// checkHost refuses, with 403, a request whose Host names this machine
// in a way DNS rebinding can forge: the host must be an IP literal,
// "localhost" or one of hosts (case-insensitive; the port is ignored).
// A page on an attacker's name that resolves to 127.0.0.1 is then
// same-origin with itself, never with the dashboard.
func checkHost(hosts []string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
		ok := host != "" && (net.ParseIP(host) != nil || strings.EqualFold(host, "localhost") ||
			slices.ContainsFunc(hosts, func(h string) bool { return strings.EqualFold(h, host) }))
		if !ok {
			http.Error(w, "fleet dashboard: forbidden host (see --allow-host)", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		next.ServeHTTP(w, r)
	})
}

// checkToken requires --token (when set) as a Bearer header or cookie;
// GET /?token=T sets the cookie and redirects to the bare page.
func (d *dashboard) checkToken(next http.Handler) http.Handler {
	want := []byte(d.f.token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(want) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		if q := r.URL.Query().Get("token"); q != "" && r.Method == http.MethodGet && r.URL.Path == "/" {
			if subtle.ConstantTimeCompare([]byte(q), want) == 1 {
				http.SetCookie(w, &http.Cookie{Name: dashboardCookie, Value: q, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
				http.Redirect(w, r, "/", http.StatusSeeOther)
				return
			}
		}
		got := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		if c, err := r.Cookie(dashboardCookie); err == nil && got == "" {
			got = c.Value
		}
		if subtle.ConstantTimeCompare([]byte(got), want) != 1 {
			http.Error(w, "fleet dashboard: token required (open /?token=...)", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// apiInstance is one instance as the page shows it.
type apiInstance struct {
	Addr           string   `json:"addr"`
	Weight         int      `json:"weight"`
	Group          string   `json:"group"`
	Version        string   `json:"version"`
	Tags           []string `json:"tags"`
	State          string   `json:"state"`
	InFlight       int64    `json:"inflight"`
	CallsPerSecond float64  `json:"calls_per_second"`
	P99Ms          float64  `json:"p99_ms"` // registry.Load.P99Ms: 0 without calls in the last interval
}

type apiService struct {
	Name      string        `json:"name"`
	Instances []apiInstance `json:"instances"`
	Error     string        `json:"error,omitempty"`
}

type apiServices struct {
	Registry string       `json:"registry"`
	Services []apiService `json:"services"`
	Time     time.Time    `json:"time"`
}

// apiServices answers GET /api/services: every service's instances as
// the registry lists them now. A registry error is reported per service.
func (d *dashboard) apiServices(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	defer cancel()
	out := apiServices{Registry: d.f.registry, Services: []apiService{}, Time: time.Now().UTC()}
	names := make([]string, 0, len(d.targets))
	for n := range d.targets {
		names = append(names, n)
	}
	sort.Strings(names)
	// The services are asked at once, so that a registry that is down
	// costs one timeout, not one per service.
	lists := make([][]registry.Instance, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Go(func() { lists[i], errs[i] = d.targets[n].disc.Instances(ctx, n) })
	}
	wg.Wait()
	for k, n := range names {
		s := apiService{Name: n, Instances: []apiInstance{}}
		list, err := lists[k], errs[k]
		if err != nil {
			s.Error = "registry: " + err.Error()
			if d.f.registry == defaultDashboardRegistry {
				s.Error += " (the default registry is fleet demo --serve's: is it running? Otherwise give --registry URL)"
			}
		}
		for _, in := range list {
			st := string(in.State)
			if st == "" {
				st = string(registry.Active)
			}
			s.Instances = append(s.Instances, apiInstance{
				Addr: in.Key(), Weight: in.EffectiveWeight(), Group: in.Group, Version: in.Version,
				Tags: append([]string{}, in.Tags...), State: st,
				InFlight: in.Load.InFlight, CallsPerSecond: in.Load.CallsPerSecond, P99Ms: in.Load.P99Ms,
			})
		}
		out.Services = append(out.Services, s)
	}
	writeJSON(w, http.StatusOK, out)
}

// apiMethods answers GET /api/methods?service=S with the methods of S as
// reflection on one instance lists them.
func (d *dashboard) apiMethods(w http.ResponseWriter, r *http.Request) {
	svc := r.URL.Query().Get("service")
	t := d.targets[svc]
	if t == nil {
		writeJSON(w, http.StatusNotFound, apiError(&callError{"methods", fleet.Errorf(fleet.NotFound, "service %q is not shown here", svc)}))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
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

type apiCallRequest struct {
	Method string         `json:"method"` // Service.Method
	Args   string         `json:"args"`   // JSON text as typed
	Codec  string         `json:"codec,omitempty"`
	Meta   fleet.Metadata `json:"metadata,omitempty"`
}

type apiCallResponse struct {
	OK        bool              `json:"ok"`
	Reply     json.RawMessage   `json:"reply,omitempty"`
	Code      string            `json:"code"`
	Status    int               `json:"exit_status"`
	Message   string            `json:"message,omitempty"`
	Server    string            `json:"server,omitempty"`
	Codec     string            `json:"codec,omitempty"`
	ElapsedMs float64           `json:"elapsed_ms,omitempty"`
	Metadata  map[string]string `json:"metadata,omitempty"`
}

func apiError(err error) apiCallResponse {
	return apiCallResponse{Code: fleet.CodeOf(err).String(), Status: exitStatus(err), Message: err.Error()}
}

// apiCall answers POST /api/call (JSON body, same origin): the call goes
// through the service's registry target as fleet call's would. Bad input
// and failed calls are answered with a JSON error, status 400 or 502.
func (d *dashboard) apiCall(w http.ResponseWriter, r *http.Request) {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		writeJSON(w, http.StatusUnsupportedMediaType, apiError(usagef("the body must be application/json")))
		return
	}
	var req apiCallRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, 4<<20))
	if err := dec.Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, apiError(usagef("request body: %v", err)))
		return
	}
	svc, _, err := splitMethod(req.Method)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, apiError(err))
		return
	}
	t := d.targets[svc]
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
	timeout := d.f.timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	if len(req.Meta) > 0 {
		ctx = fleet.WithOutgoingMetadata(ctx, req.Meta)
	}
	res, err := doCall(ctx, t, req.Codec, req.Method, []byte(args))
	d.log.Info("fleet dashboard: call", "method", req.Method, "remote", r.RemoteAddr, "code", fleet.CodeOf(err).String())
	out := apiCallResponse{OK: err == nil, Code: fleet.CodeOf(err).String()}
	if res != nil {
		out.Server, out.Codec, out.Metadata = res.where, res.codec, res.md
		out.ElapsedMs = float64(res.elapsed.Microseconds()) / 1000
		out.Reply = res.reply
	}
	if err != nil {
		e := apiError(err)
		out.Status, out.Message = e.Status, e.Message
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
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		writeJSON(w, http.StatusUnsupportedMediaType, apiError(usagef("the body must be application/json")))
		return
	}
	var req apiSteerRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, apiError(usagef("request body: %v", err)))
		return
	}
	t := d.targets[req.Service]
	if t == nil {
		writeJSON(w, http.StatusBadRequest, apiError(usagef("service %q is not shown here", req.Service)))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
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

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
