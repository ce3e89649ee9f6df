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
// with connect-go's client, 100 callers per GOMAXPROCS, over HTTP/1.1 and
// h2c: through the gateway's Connect and gRPC-Web side (WithH2CToHTTP),
// and, for Connect with protobuf, from connect-go's own server with the
// same handler on net/http (the same HTTP/1.1 and h2c server set-up);
// compare BenchmarkGRPCEcho for gRPC:
//
//	go test -run '^$' -bench ConnectEcho -benchmem ./gateway/
func BenchmarkConnectEcho(b *testing.B) {
	h1 := &http.Transport{MaxIdleConnsPerHost: 1000}
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	h2 := &http.Transport{Protocols: &p}
	defer h1.CloseIdleConnections()
	defer h2.CloseIdleConnections()
	run := func(b *testing.B, base string, tr *http.Transport, opts ...connecthttp.Option) {
		client := connect.NewClient(connecthttp.NewTransport(&http.Client{Transport: tr}, base, opts...))
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
	}
	b.Run("gateway", func(b *testing.B) {
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
			b.Run(c.name, func(b *testing.B) { run(b, base, c.tr, c.opts...) })
		}
	})
	b.Run("connect-go", func(b *testing.B) {
		base := connectGoServer(b)
		b.Run("connect+proto/http1", func(b *testing.B) { run(b, base, h1) })
		b.Run("connect+proto/h2c", func(b *testing.B) { run(b, base, h2) })
	})
}

// connectGoServer serves pb.Hello/Say and Hello/Say (the benchmark
// message, echoed as demo.Hello does) from connect-go's own server on
// net/http, HTTP/1.1 and h2c, on a loopback port closed when the
// benchmark ends, and returns its base URL.
func connectGoServer(b *testing.B) string {
	say := func(ctx context.Context, _ connect.Spec, st connect.ServerStream) error {
		in := new(benchpb.BenchmarkMessage)
		if err := st.Receive(in); err != nil {
			return err
		}
		out := new(benchpb.BenchmarkMessage)
		benchpb.Echo(out, in)
		return st.Send(out)
	}
	cs := connect.NewServer()
	cs.Register(connect.Method{Spec: unarySpec("/Hello/Say"), Handler: say})
	mux := http.NewServeMux()
	connecthttp.Mount(mux, cs)
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetUnencryptedHTTP2(true)
	hs := &http.Server{Handler: mux, Protocols: &protos}
	lis := listen(b)
	go func() { _ = hs.Serve(lis) }()
	b.Cleanup(func() { hs.Close() })
	return "http://" + lis.Addr().String()
}
