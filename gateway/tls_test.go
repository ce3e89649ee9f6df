package gateway_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/gateway"
	"github.com/fleetrpc/fleet/internal/benchpb"
	"github.com/fleetrpc/fleet/internal/demo"
	"github.com/fleetrpc/fleet/internal/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// TestTLS serves TLS and cleartext on one port: grpc-go over TLS (ALPN
// h2), HTTP/JSON over HTTP/2 and TLS, the native client over TLS and in
// cleartext.
func TestTLS(t *testing.T) {
	srvTLS, cliTLS := testutil.TLSConfigs(t)
	_, addr := start(t, nil, gateway.WithTLS(srvTLS))
	ctx := context.Background()

	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cliTLS.Clone())))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	in, out := benchpb.New(), new(benchpb.BenchmarkMessage)
	if err := cc.Invoke(ctx, "/pb.Hello/Say", in, out); err != nil || demo.CheckReply(in, out) != nil {
		t.Fatalf("gRPC over TLS: %v", err)
	}

	tr := &http.Transport{TLSClientConfig: cliTLS.Clone(), ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 20 * time.Second}
	resp, b := post(t, hc, "https://"+addr+"/Arith/Add", `{"A":2,"B":3}`, nil)
	if resp.StatusCode != 200 || string(b) != "5" || resp.ProtoMajor != 2 {
		t.Fatalf("HTTP/JSON over TLS: %s %d %s", resp.Proto, resp.StatusCode, b)
	}

	for _, opts := range [][]client.Option{{client.WithTLS(cliTLS.Clone())}, nil} {
		c, err := client.Dial(ctx, "tcp", addr, opts...)
		if err != nil {
			t.Fatal(err)
		}
		var sum int
		err = c.Call(ctx, "Arith", "Add", &demo.Args{A: 4, B: 5}, &sum)
		c.Close()
		if err != nil || sum != 9 {
			t.Fatalf("native (TLS %v): %d %v", opts != nil, sum, err)
		}
	}
}

// TestShutdownWithOpenClients shuts the gateway down while a native
// client, a gRPC client and an HTTP keep-alive connection are open:
// Shutdown returns, Serve returns ErrClosed, and later calls fail.
func TestShutdownWithOpenClients(t *testing.T) {
	g, addr, done := startManual(t, nil)
	ctx := context.Background()
	nc, err := client.Dial(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var sum int
	if err := nc.Call(ctx, "Arith", "Add", &demo.Args{A: 1, B: 1}, &sum); err != nil {
		t.Fatal(err)
	}
	cc := grpcConn(t, addr)
	if err := cc.Invoke(ctx, "/Hello/Say", benchpb.New(), new(benchpb.BenchmarkMessage)); err != nil {
		t.Fatal(err)
	}
	hc := httpClient(t)
	if resp, _ := post(t, hc, "http://"+addr+"/Arith/Add", `{"A":0,"B":0}`, nil); resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := g.Shutdown(sctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := <-done; !errors.Is(err, gateway.ErrClosed) {
		t.Fatalf("Serve: %v", err)
	}
	if err := nc.Call(ctx, "Arith", "Add", &demo.Args{A: 1, B: 1}, &sum); err == nil {
		t.Fatal("native call after Shutdown succeeded")
	}
	if _, err := net.DialTimeout("tcp", addr, 5*time.Second); err == nil {
		t.Fatal("the listener still accepts after Shutdown")
	}
}

// TestH2CToHTTP: with WithH2CToHTTP, an h2c connection carries HTTP/JSON,
// JSON-RPC and gRPC (through ServeHTTP).
func TestH2CToHTTP(t *testing.T) {
	_, addr := start(t, nil, gateway.WithH2CToHTTP(true))
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &protos}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 20 * time.Second}
	resp, b := post(t, hc, "http://"+addr+"/Arith/Add", `{"A":2,"B":3}`, nil)
	if resp.StatusCode != 200 || string(b) != "5" || resp.ProtoMajor != 2 {
		t.Fatalf("HTTP/JSON over h2c: %s %d %s", resp.Proto, resp.StatusCode, b)
	}
	resp, b = post(t, hc, "http://"+addr+"/", `{"jsonrpc":"2.0","method":"Arith.Add","params":{"A":1,"B":1},"id":1}`, nil)
	if resp.StatusCode != 200 || string(b) != `{"jsonrpc":"2.0","result":2,"id":1}` || resp.ProtoMajor != 2 {
		t.Fatalf("JSON-RPC over h2c: %s %d %s", resp.Proto, resp.StatusCode, b)
	}
	cc := grpcConn(t, addr)
	in, out := benchpb.New(), new(benchpb.BenchmarkMessage)
	if err := cc.Invoke(context.Background(), "/Hello/Say", in, out); err != nil || demo.CheckReply(in, out) != nil {
		t.Fatalf("gRPC over h2c through net/http: %v", err)
	}
}
