package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"connectrpc.com/connect/v2"
	"connectrpc.com/connect/v2/connecthttp"
	"github.com/fleetrpc/fleet/gateway"
	"github.com/fleetrpc/fleet/internal/benchpb"
)

// BenchmarkConnectEcho measures Hello.Say (the benchmark message, echoed)
// through the gateway's Connect and gRPC-Web side with connect-go's
// client, 100 callers per GOMAXPROCS, over HTTP/1.1 and h2c
// (WithH2CToHTTP); compare BenchmarkGRPCEcho for gRPC.
func BenchmarkConnectEcho(b *testing.B) {
	g := gateway.New(benchServer(b), gateway.WithLogger(discard()), gateway.WithH2CToHTTP(true))
	lis := listen(b)
	done := make(chan error, 1)
	go func() { done <- g.Serve(lis) }()
	defer func() {
		g.Close()
		if err := <-done; !errors.Is(err, gateway.ErrClosed) {
			b.Error(err)
		}
	}()
	base := "http://" + lis.Addr().String()
	h1 := &http.Transport{MaxIdleConnsPerHost: 1000}
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	h2 := &http.Transport{Protocols: &p}
	defer h1.CloseIdleConnections()
	defer h2.CloseIdleConnections()
	for _, c := range []struct {
		name string
		tr   *http.Transport
		opts []connecthttp.Option
	}{
		{"connect+proto/http1", h1, nil},
		{"connect+proto/h2c", h2, nil},
		{"connect+json/h2c", h2, []connecthttp.Option{connecthttp.WithProtoJSON()}},
		{"grpcweb+proto/h2c", h2, []connecthttp.Option{connecthttp.WithGRPCWeb()}},
	} {
		b.Run(c.name, func(b *testing.B) {
			client := connect.NewClient(connecthttp.NewTransport(&http.Client{Transport: c.tr}, base, c.opts...))
			in := benchpb.New()
			b.SetParallelism(100)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				out := new(benchpb.BenchmarkMessage)
				for pb.Next() {
					if err := client.CallUnary(context.Background(), unarySpec("/Hello/Say"), in, out); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
