package accesslog_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/gateway"
	"github.com/fleetrpc/fleet/observability/accesslog"
	"github.com/fleetrpc/fleet/server"
)

// TestStreamAndGatewayRecords: a client stream is logged once, when it
// ends, with its kind and message counts; a call through the gateway's
// HTTP/JSON side is logged with route "http", a native call with
// "native".
func TestStreamAndGatewayRecords(t *testing.T) {
	rec := &recorder{level: slog.LevelDebug}
	srv := server.New(server.WithInterceptor(accesslog.Server(slog.New(rec))))
	if err := server.HandleClientStream(srv, "Sum", "Add", func(ctx context.Context, st *server.ClientStream[Args]) (*int, error) {
		n := 0
		for st.Receive() {
			n += st.Msg().A
		}
		return &n, st.Err()
	}); err != nil {
		t.Fatal(err)
	}
	if err := srv.RegisterFunction("Arith", "Add", func(ctx context.Context, a *Args, s *int) error { *s = a.A + a.B; return nil }); err != nil {
		t.Fatal(err)
	}
	g := gateway.New(srv)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- g.Serve(lis) }()
	t.Cleanup(func() {
		g.Close()
		if err := <-done; err != nil && !errors.Is(err, gateway.ErrClosed) {
			t.Errorf("gateway Serve: %v", err)
		}
	})
	addr := lis.Addr().String()
	c, err := client.Dial(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	cs, err := client.CallClientStream[Args, int](context.Background(), c, "Sum", "Add")
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 4; i++ {
		if err := cs.Send(&Args{A: i}); err != nil {
			t.Fatal(err)
		}
	}
	if sum, err := cs.CloseAndReceive(); err != nil || *sum != 10 {
		t.Fatalf("Sum.Add = %v, %v", sum, err)
	}
	var s int
	if err := c.Call(context.Background(), "Arith", "Add", &Args{A: 1, B: 2}, &s); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post("http://"+addr+"/Arith/Add", "application/json", strings.NewReader(`{"A":2,"B":3}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	if resp.StatusCode != 200 || string(b) != "5" {
		t.Fatalf("HTTP/JSON: %d %s", resp.StatusCode, b)
	}

	recs := rec.take()
	if len(recs) != 3 {
		t.Fatalf("%d records, want 3: %v", len(recs), recs)
	}
	st, native, viaHTTP := recs[0], recs[1], recs[2]
	if st["msg"] != "fleet stream" || st["service"] != "Sum" || st["stream"] != "client" || st["route"] != "native" ||
		st["msgs_received"] != int64(4) || st["msgs_sent"] != int64(1) || st["code"] != "ok" {
		t.Errorf("stream record %v", st)
	}
	if native["msg"] != "fleet call" || native["route"] != "native" || native["method"] != "Add" {
		t.Errorf("native call record %v", native)
	}
	if viaHTTP["msg"] != "fleet call" || viaHTTP["route"] != "http" || viaHTTP["method"] != "Add" || viaHTTP["code"] != "ok" {
		t.Errorf("HTTP/JSON call record %v", viaHTTP)
	}
}
