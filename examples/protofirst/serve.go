package main

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	greeterv1 "github.com/fleetrpc/fleet/examples/protofirst/gen/greeter/v1"
	"github.com/fleetrpc/fleet/gateway"
	"github.com/fleetrpc/fleet/server"
)

// web holds the browser page: index.html and app.js, the connect-es
// client bundled from web/client.js by web/build.sh.
//
//go:embed web/index.html web/app.js
var web embed.FS

// serve runs the example as a server until SIGINT or SIGTERM: the
// generated service behind a gateway listening on addr (Fleet's native
// protocol, gRPC, Connect, gRPC-Web and HTTP/JSON on one port), and the
// page under web/ on pageAddr, from which the gateway allows calls
// (gateway.WithCORS), and only under that origin's host. It prints the
// gateway's URL and the page's.
func serve(addr, pageAddr string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	pageLis, err := net.Listen("tcp", pageAddr)
	if err != nil {
		lis.Close()
		return err
	}
	gatewayURL := "http://" + lis.Addr().String()
	pageOrigin := "http://" + pageLis.Addr().String()

	srv := server.New()
	if err := greeterv1.RegisterGreeterService(srv, Greeter{}); err != nil {
		return err
	}
	// The page's origin may call the service with Connect or gRPC-Web;
	// pages of other origins are refused.
	gw := gateway.New(srv, gateway.WithCORS(gateway.CORS{AllowedOrigins: []string{pageOrigin}}))
	files, err := fs.Sub(web, "web")
	if err != nil {
		return err
	}
	// The page is served only under the origin the gateway allows (a
	// Host check, as for every HTTP listener that serves a browser).
	static := http.FileServerFS(files)
	page := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Host != pageLis.Addr().String() {
				http.Error(w, "this page is served as "+pageOrigin, http.StatusMisdirectedRequest)
				return
			}
			static.ServeHTTP(w, r)
		}),
		MaxHeaderBytes:    16 << 10,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       time.Minute,
		ErrorLog:          slog.NewLogLogger(slog.Default().Handler(), slog.LevelDebug),
	}
	errc := make(chan error, 2)
	go func() { errc <- gw.Serve(lis) }()
	go func() { errc <- page.Serve(pageLis) }()
	fmt.Println("gateway:", gatewayURL)
	fmt.Printf("page: %s/?gateway=%s\n", pageOrigin, gatewayURL)

	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// The page server serves only static files: it gets a second to finish
	// them, then its connections are closed (a browser's preconnected,
	// silent connection would otherwise hold net/http's Shutdown for 5 s).
	pctx, pcancel := context.WithTimeout(sctx, time.Second)
	defer pcancel()
	if page.Shutdown(pctx) != nil {
		_ = page.Close()
	}
	// srv.Shutdown stops the gateway too (gateway.New registers it).
	return errors.Join(err, srv.Shutdown(sctx))
}
