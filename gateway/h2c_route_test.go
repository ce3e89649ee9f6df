package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect/v2"
	"github.com/fleetrpc/fleet/internal/benchpb"
	"github.com/fleetrpc/fleet/internal/demo"
)

// TestH2CRouteByFirstRequest: without WithH2CToHTTP, a cleartext HTTP/2
// connection goes to grpc-go's transport or to net/http by its first
// request, so every protocol works over h2c: Connect and gRPC-Web (proto
// and JSON), HTTP/JSON, a Connect call of a path that is not served
// (Connect's 404 with code unimplemented, not grpc-go's 415), and
// grpc-go's client, also on a connection left idle past the sniffer's
// wait before its first call.
func TestH2CRouteByFirstRequest(t *testing.T) {
	_, addr := start(t, nil)
	for name, c := range connectClients(h2cClient(t), addr) {
		in, out := benchpb.New(), new(benchpb.BenchmarkMessage)
		if err := c.CallUnary(context.Background(), unarySpec("/Hello/Say"), in, out); err != nil {
			t.Fatalf("%s over h2c: %v", name, err)
		}
		if err := demo.CheckReply(in, out); err != nil {
			t.Fatalf("%s over h2c: %v", name, err)
		}
		err := c.CallUnary(context.Background(), unarySpec("/Nope/Say"), benchpb.New(), new(benchpb.BenchmarkMessage))
		if connect.CodeOf(err) != connect.CodeUnimplemented {
			t.Fatalf("%s over h2c, unknown path: %v", name, err)
		}
	}
	hc := h2cClient(t)
	resp, body := post(t, hc, "http://"+addr+"/Nope/Say", `{}`, map[string]string{"Connect-Protocol-Version": "1"})
	var ce struct{ Code string }
	if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusNotFound || json.Unmarshal(body, &ce) != nil || ce.Code != "unimplemented" {
		t.Fatalf("Connect unknown path over h2c: HTTP/%d %d %s", resp.ProtoMajor, resp.StatusCode, body)
	}
	resp, body = post(t, h2cClient(t), "http://"+addr+"/Arith/Add", `{"A":1,"B":2}`, nil)
	if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusOK || string(body) != "3" {
		t.Fatalf("HTTP/JSON over h2c: HTTP/%d %d %s", resp.ProtoMajor, resp.StatusCode, body)
	}

	cc := grpcConn(t, addr)
	cc.Connect()
	time.Sleep(1500 * time.Millisecond) // past the sniffer's 1 s wait
	for range 2 {
		in, out := benchpb.New(), new(benchpb.BenchmarkMessage)
		if err := cc.Invoke(context.Background(), "/Hello/Say", in, out); err != nil {
			t.Fatalf("gRPC after an idle second: %v", err)
		}
		if err := demo.CheckReply(in, out); err != nil {
			t.Fatal(err)
		}
	}
}
