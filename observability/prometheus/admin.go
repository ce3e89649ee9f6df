package fleetprom

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
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
	// Pprof serves net/http/pprof under /debug/pprof/. Default off.
	Pprof bool
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
	if cfg.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	if cfg.Token == "" {
		return mux
	}
	want := []byte("Bearer " + cfg.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	})
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
// refused unless cfg.Token is set. Stop it with Close.
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
		srv:  &http.Server{Handler: AdminHandler(cfg), ReadHeaderTimeout: 10 * time.Second},
		lis:  lis,
		done: make(chan struct{}),
	}
	go func() {
		defer close(a.done)
		_ = a.srv.Serve(lis)
	}()
	return a, nil
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
