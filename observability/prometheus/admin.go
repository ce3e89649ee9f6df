package fleetprom

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/fleetrpc/fleet/server"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// AdminConfig configures an admin endpoint. The zero value serves the
// default registry's metrics and reports no server.
type AdminConfig struct {
	// Gatherer is what /metrics serves. Default prometheus.DefaultGatherer.
	Gatherer prometheus.Gatherer
	// Servers are reported by /healthz and /readyz, by name (the name is
	// only used in the report). Default none.
	Servers map[string]*server.Server
	// Ready, when set, must also return true for /readyz to answer 200.
	Ready func() bool
	// Pprof serves net/http/pprof under /debug/pprof/, the process's
	// command line (/debug/pprof/cmdline) included. Default off.
	Pprof bool
	// Hosts are the host names, besides IP literals and "localhost", that
	// requests may carry in their Host header; any other name is refused
	// with 403, so a web page cannot reach the endpoint through DNS
	// rebinding (a name of the attacker's that resolves to this
	// machine). Default none.
	Hosts []string
	// OpenAPI, when set, is served at /openapi.json: the document of the
	// gateway's HTTP/JSON routes, such as gateway.Gateway.OpenAPI writes
	// it, built on each request. Default none (404).
	OpenAPI func() ([]byte, error)
	// Policies, when set, lists the traffic-policy watchers /policy
	// reports (a PolicyCollector's Watchers method, or a function
	// returning *policy.Watcher values). Default none (404).
	Policies func() []PolicyStats
	// Token, when set, is required on every request as
	// "Authorization: Bearer <Token>". ListenAdmin refuses a non-loopback
	// address without one. Default "".
	Token string
}

// AdminHandler returns the admin endpoint's handler:
//
//	/metrics        the Prometheus exposition of cfg.Gatherer
//	/healthz        200 when every server in cfg.Servers is SERVING, else 503;
//	                the body has one "name STATUS" line per server
//	/readyz         as /healthz, and 503 also while cfg.Ready returns false
//	/debug/pprof/   the runtime profiles, when cfg.Pprof is set
//	/openapi.json   the OpenAPI document cfg.OpenAPI returns, when set
//	                (500 with the error's text when it fails)
//	/policy         the traffic policies in force, when cfg.Policies is set:
//	                a JSON array, one object per watcher ordered by service
//	                (*policy.Watcher's MarshalJSON: service, version,
//	                applied, refused, lastError, policy)
//
// Every request must carry a Host that is an IP literal,
// "localhost" or one of cfg.Hosts, and be one a browser did not mark as
// cross-site or same-site (Sec-Fetch-Site) nor send with an Origin
// header; others are answered 403 before anything else runs, so a web
// page the operator opens cannot read the endpoint.
//
// A server is NOT_SERVING from the moment its Shutdown begins
// (server.Server.ServingStatus), so a load balancer polling /readyz stops
// sending traffic while the server drains.
func AdminHandler(cfg AdminConfig) http.Handler {
	g := cfg.Gatherer
	if g == nil {
		g = prometheus.DefaultGatherer
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{EnableOpenMetrics: true}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { health(w, cfg.Servers, true) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		health(w, cfg.Servers, cfg.Ready == nil || cfg.Ready())
	})
	if cfg.OpenAPI != nil {
		mux.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, r *http.Request) {
			doc, err := cfg.OpenAPI()
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(doc)
		})
	}
	if cfg.Policies != nil {
		mux.HandleFunc("GET /policy", func(w http.ResponseWriter, r *http.Request) {
			ws := sortPolicies(slices.Clone(cfg.Policies()))
			out := make([]json.RawMessage, 0, len(ws))
			for _, pw := range ws {
				b, err := pw.MarshalJSON()
				if err != nil {
					http.Error(w, err.Error(), http.StatusInternalServerError)
					return
				}
				out = append(out, b)
			}
			b, err := json.MarshalIndent(out, "", "  ")
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(append(b, '\n'))
		})
	}
	if cfg.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	var h http.Handler = mux
	if cfg.Token != "" {
		want := []byte("Bearer " + cfg.Token)
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			mux.ServeHTTP(w, r)
		})
	}
	return browserGuard(cfg.Hosts, h)
}

// browserGuard refuses what DNS rebinding or a cross-site page can send:
// a Host that is not an IP literal, "localhost" or one of hosts; a
// request a browser marks as cross-site or same-site; any Origin header
// (the endpoint has no page of its own, so no request of its own carries
// one).
func browserGuard(hosts []string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hostAllowed(r.Host, hosts) {
			http.Error(w, "forbidden host", http.StatusForbidden)
			return
		}
		switch r.Header.Get("Sec-Fetch-Site") {
		case "", "none", "same-origin":
		default:
			http.Error(w, "cross-site request refused", http.StatusForbidden)
			return
		}
		if r.Header.Get("Origin") != "" {
			http.Error(w, "cross-origin request refused", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// hostAllowed reports whether a Host header names this machine in a way
// DNS rebinding cannot forge: an IP literal, "localhost", or a name in
// hosts (case-insensitive; the port is ignored).
func hostAllowed(hostport string, hosts []string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if host == "" {
		return false
	}
	if net.ParseIP(host) != nil || strings.EqualFold(host, "localhost") {
		return true
	}
	for _, h := range hosts {
		if strings.EqualFold(host, h) {
			return true
		}
	}
	return false
}

func health(w http.ResponseWriter, servers map[string]*server.Server, ready bool) {
	names := make([]string, 0, len(servers))
	for name := range servers {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	ok := ready
	for _, name := range names {
		st, _ := servers[name].ServingStatus("")
		if st != server.StatusServing {
			ok = false
		}
		fmt.Fprintf(&b, "%s %s\n", name, st)
	}
	if !ready {
		b.WriteString("not ready\n")
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if ok {
		w.WriteHeader(http.StatusOK)
	} else {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_, _ = w.Write([]byte(b.String()))
}

// Admin is a running admin endpoint (ListenAdmin).
type Admin struct {
	srv  *http.Server
	lis  net.Listener
	done chan struct{}
}

// ListenAdmin serves AdminHandler(cfg) on its own HTTP listener at addr
// (default "127.0.0.1:9464" when addr is ""). A non-loopback address is
// refused unless cfg.Token is set. Its HTTP server reads a request's
// headers within 10 s (at most 64 KiB) and the whole request within 20 s,
// writes a response within 90 s and closes idle connections after 2
// minutes. Stop it with Close.
func ListenAdmin(addr string, cfg AdminConfig) (*Admin, error) {
	if addr == "" {
		addr = "127.0.0.1:9464"
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("fleetprom: admin address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); (ip == nil || !ip.IsLoopback()) && host != "localhost" && cfg.Token == "" {
		return nil, errors.New("fleetprom: admin endpoint on a non-loopback address needs a Token")
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	a := &Admin{
		srv:  newAdminServer(AdminHandler(cfg)),
		lis:  lis,
		done: make(chan struct{}),
	}
	go func() {
		defer close(a.done)
		_ = a.srv.Serve(lis)
	}()
	return a, nil
}

// newAdminServer is the admin endpoint's HTTP server: headers within
// 10 s (64 KiB at most), the whole request within 20 s, the response
// within 90 s (a CPU profile takes 30 s by default), idle keep-alive
// connections closed after 2 minutes.
func newAdminServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       20 * time.Second,
		WriteTimeout:      90 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
}

// Addr returns the address the endpoint listens on.
func (a *Admin) Addr() net.Addr { return a.lis.Addr() }

// Close stops the endpoint, waiting up to 5 s for requests in progress.
func (a *Admin) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := a.srv.Shutdown(ctx)
	<-a.done
	return err
}
