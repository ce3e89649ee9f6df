package gateway_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"connectrpc.com/connect/v2"
	"connectrpc.com/connect/v2/connecthttp"
	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/internal/benchpb"
	"github.com/fleetrpc/fleet/server"
)

// TestRoutesReachInterceptors: a call through each of the gateway's
// protocols, and one on the native port it shares, runs the server's
// interceptor chain with its route in the CallInfo.
func TestRoutesReachInterceptors(t *testing.T) {
	var mu sync.Mutex
	var routes []string
	ic := server.UnaryInterceptorFunc(func(next server.UnaryFunc) server.UnaryFunc {
		return func(ctx context.Context, info *fleet.CallInfo, args, reply any) error {
			mu.Lock()
			routes = append(routes, string(info.Route)+" "+info.Service+"."+info.Method)
			mu.Unlock()
			return next(ctx, info, args, reply)
		}
	})
	_, addr := start(t, []server.Option{server.WithInterceptor(ic)})

	cc := grpcConn(t, addr)
	if err := cc.Invoke(context.Background(), "/Hello/Say", benchpb.New(), new(benchpb.BenchmarkMessage)); err != nil {
		t.Fatalf("gRPC: %v", err)
	}
	hc := httpClient(t)
	if resp, b := post(t, hc, "http://"+addr+"/Arith/Add", `{"A":20,"B":22}`, nil); resp.StatusCode != 200 || string(b) != "42" {
		t.Fatalf("HTTP/JSON: %d %s", resp.StatusCode, b)
	}
	if resp, b := post(t, hc, "http://"+addr+"/jsonrpc", `{"jsonrpc":"2.0","method":"Arith.Mul","params":{"A":2,"B":3},"id":1}`, nil); resp.StatusCode != 200 || string(b) != `{"jsonrpc":"2.0","result":6,"id":1}` {
		t.Fatalf("JSON-RPC: %d %s", resp.StatusCode, b)
	}
	cj := map[string]string{"Content-Type": "application/json", "Connect-Protocol-Version": "1"}
	if resp, b := post(t, hc, "http://"+addr+"/Arith/Add", `{"A":1,"B":1}`, cj); resp.StatusCode != 200 || string(b) != "2" {
		t.Fatalf("Connect: %d %s", resp.StatusCode, b)
	}
	web := connect.NewClient(connecthttp.NewTransport(hc, "http://"+addr, connecthttp.WithGRPCWeb()))
	if err := web.CallUnary(context.Background(), unarySpec("/Hello/Say"), benchpb.New(), new(benchpb.BenchmarkMessage)); err != nil {
		t.Fatalf("gRPC-Web: %v", err)
	}
	c, err := client.Dial(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var sum int
	if err := c.Call(context.Background(), "Arith", "Add", &struct{ A, B int }{1, 2}, &sum); err != nil || sum != 3 {
		t.Fatalf("native: %d, %v", sum, err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"grpc Hello.Say", "http Arith.Add", "jsonrpc Arith.Mul", "connect Arith.Add", "grpcweb Hello.Say", "native Arith.Add"}
	if !slices.Equal(routes, want) {
		t.Fatalf("interceptor saw %q, want %q", routes, want)
	}
}
