package main

import (
	"context"
	"crypto/subtle"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetrpc/fleet/policy"
	"github.com/fleetrpc/fleet/registry"
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
the services of the --registry registry (by default etcd://127.0.0.1:2379,
where fleet demo --serve listens its embedded etcd): every service the
registry holds, found again every second (etcd, ZooKeeper, Redis and NATS
list their services; a static:// list needs --service, which also shows
fewer). For each instance: address, weight, group, version, tags and
state, with buttons that change its weight or disable (drain) and enable
it through the server's fleet.Admin service; a service whose instances are
all disabled is shown as "all instances draining", and disabling the last
active instance asks for confirmation.

Load is shown per server, not per service: a server reports one load for
the whole process (in flight, calls/s, p99 handling time) in each of its
registry records. The dashboard samples it every second and keeps the last
5 minutes, so the charts are full when the page opens.

Each service's traffic policy (docs/policy.md) is shown from the
registry's policy store (etcd, ZooKeeper, Redis and NATS; none for
static://): the version in force, its subsets, each route's match,
split, timeout, retry, hedging and fault, the per-method server limits,
and the status of a policy watcher the dashboard runs on that store
(documents applied and refused, why the newest was refused). A route's
split (its destinations' weights), or the whole document as text, is
edited on the page: after a confirmation it is checked as fleet policy
validate checks it, written with the next version, and applied by every
client and server watching that store; an invalid one is refused with
its problems listed and nothing written.

A form calls any method of those services with a JSON argument, as fleet
call does (reflection, protojson for protobuf methods, unknown and missing
fields refused unless "loose" is ticked); choosing a method fills in the
zero-value template fleet describe prints; errors are worded as fleet call
words them, with its exit status.

Safety: it listens on 127.0.0.1 by default; any other address requires
--token, which the browser then presents once as /?token=... (kept in an
HttpOnly, SameSite=Strict cookie) and scripts as "Authorization: Bearer ...".
POST requests (the call form, steering, policy edits) must be same-origin (Go's
http.CrossOriginProtection, Sec-Fetch-Site / Origin) and JSON. Every
request must name the page's host as an IP address, localhost or an
--allow-host name (DNS rebinding is refused with 403). The token sent to
the servers (fleet.Admin of fleet demo --serve needs one) is --token, else
$FLEET_TOKEN, else --token-file, by default the file where fleet demo
--serve writes its admin token.`,
		Example: "  fleet dashboard\n  fleet dashboard --registry etcd://127.0.0.1:2379 --service Arith --service Hello",
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
			shown := "every service it lists"
			if len(f.services) > 0 {
				shown = strings.Join(f.services, ", ")
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "dashboard on http://%s/ (registry %s; services: %s)\n", lis.Addr(), f.registry, shown)
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
	fl.StringArrayVar(&f.services, "service", nil, "a service to show (repeatable; default: every service the registry lists; required with a static:// registry)")
	fl.StringVar(&f.listen, "listen", "127.0.0.1:8090", "address to serve the page on; not loopback only with --token")
	fl.StringArrayVar(&f.hosts, "allow-host", nil, "a host name the page may be reached by, besides IP addresses and localhost (repeatable); requests naming any other host are refused, against DNS rebinding")
	return cmd
}

// defaultDashboardRegistry is --registry's default: the embedded etcd of
// fleet demo --serve.
const defaultDashboardRegistry = "etcd://" + defaultRegistryAddr

// dashboard serves the page and its JSON API for one registry.
type dashboard struct {
	f    *dashboardFlags
	base string // the registry URL without a trailing '/'
	log  *slog.Logger
	// shared is the registry target whose discovery every service's
	// target shares; nil for a static:// registry, whose targets are
	// opened per --service.
	shared *target
	lister registry.ServiceLister // nil when the registry cannot list services
	hist   *loadHistory
	// policies is the registry's policy store (nil for a static://
	// registry); watchers follow each shown service's policy in it.
	policies      policy.Store
	closePolicies func()
	stop          context.CancelFunc
	done          chan struct{}

	mu       sync.Mutex
	targets  map[string]*target      // by service: the --service ones, or those last listed
	watchers map[string]*policyWatch // by service, started when first shown; nil once closed
}

// newDashboard opens the registry and starts sampling its servers' load
// every second (close stops it). Without --service the services are
// those the registry lists (registry.ServiceLister), found again at each sample.
func newDashboard(f *dashboardFlags) (*dashboard, error) {
	if f.registry == "" {
		return nil, usagef("dashboard: --registry is required")
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
	for _, svc := range f.services {
		if svc == "" || strings.ContainsAny(svc, "/?#") {
			return nil, usagef("dashboard: bad service name %q", svc)
		}
	}
	d := &dashboard{f: f, base: strings.TrimSuffix(f.registry, "/"), targets: map[string]*target{}, watchers: map[string]*policyWatch{},
		log: slog.New(slog.NewTextHandler(os.Stderr, nil)), hist: newLoadHistory(historyWindow)}
	if strings.HasPrefix(d.base, "static://") {
		// A static list has no services of its own: each --service is
		// the fixed list of addresses.
		if len(f.services) == 0 {
			return nil, usagef("dashboard: a static:// registry needs --service NAME")
		}
		for _, svc := range f.services {
			t, err := openTarget(d.base+"/"+url.PathEscape(svc), &f.connFlags)
			if err != nil {
				d.close()
				return nil, err
			}
			d.targets[svc] = t
		}
	} else {
		// One discovery for every service; "_" only fills the target's
		// service path, each service gets its own copy of the target.
		t, err := openTarget(d.base+"/_", &f.connFlags)
		if err != nil {
			return nil, err
		}
		d.shared = t
		d.lister, _ = t.disc.(registry.ServiceLister)
		if len(f.services) == 0 && d.lister == nil {
			t.close()
			return nil, usagef("dashboard: registry %s cannot list its services: name them with --service", f.registry)
		}
		for _, svc := range f.services {
			d.targets[svc] = d.serviceTarget(svc)
		}
		if err := d.openPolicies(); err != nil {
			d.close()
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	d.stop, d.done = cancel, make(chan struct{})
	go d.sampleLoop(ctx)
	return d, nil
}

// serviceTarget returns a target for svc on the shared discovery.
func (d *dashboard) serviceTarget(svc string) *target {
	t := *d.shared
	t.raw, t.service, t.close, t.fleetPeer = d.base+"/"+url.PathEscape(svc), svc, func() {}, false
	return &t
}

// close stops the sampling and closes the registry connections.
func (d *dashboard) close() {
	if d.stop != nil {
		d.stop()
		<-d.done
		d.stop = nil
	}
	d.closePolicyWatchers()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, t := range d.targets {
		t.close()
	}
	d.targets = map[string]*target{}
	if d.shared != nil {
		d.shared.close()
		d.shared = nil
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
	mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/svg+xml")
		w.Header().Set("Cache-Control", "max-age=86400")
		b, _ := fs.ReadFile(static, "favicon.svg")
		w.Write(b)
	})
	mux.HandleFunc("GET /api/describe", d.apiDescribe)
	mux.HandleFunc("GET /api/services", d.apiServices)
	mux.HandleFunc("GET /api/methods", d.apiMethods)
	mux.HandleFunc("POST /api/call", d.apiCall)
	mux.HandleFunc("POST /api/steer", d.apiSteer)
	mux.HandleFunc("POST /api/policy", d.apiPolicySet)
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
