package fleetprom_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/gateway"
	fleetprom "github.com/fleetrpc/fleet/observability/prometheus"
	"github.com/fleetrpc/fleet/server"
	"github.com/prometheus/client_golang/prometheus"
)

// Word is a stream message.
type Word struct{ S string }

// serveGateway registers Arith and the Chat streams on srv and serves it
// behind a gateway (the native protocol and HTTP/JSON on one loopback
// port) until the test ends.
func serveGateway(t *testing.T, srv *server.Server) string {
	t.Helper()
	if err := srv.Register(Arith{}); err != nil {
		t.Fatal(err)
	}
	if err := server.HandleBidiStream(srv, "Chat", "Echo", func(ctx context.Context, st *server.BidiStream[Word, Word]) error {
		for {
			w, err := st.Receive()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			if err := st.Send(w); err != nil {
				return err
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := server.HandleServerStream(srv, "Chat", "Spell", func(ctx context.Context, w *Word, st *server.ServerStream[Word]) error {
		for _, r := range w.S {
			if err := st.Send(&Word{S: string(r)}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
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
	return lis.Addr().String()
}

// Stream and gateway traffic exercise makes, and the counts it gives.
const (
	echoWords  = 3 // bidi Chat.Echo: received and sent
	spellWord  = "fleet"
	httpCalls  = 2 // Arith.Add over HTTP/JSON
	spellCalls = 1
)

// exercise runs one bidi stream of echoWords messages each way, one
// server stream spelling spellWord, and httpCalls HTTP/JSON calls.
func exercise(t *testing.T, addr string, opts ...client.Option) {
	t.Helper()
	ctx := context.Background()
	c, err := client.Dial(ctx, "tcp", addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	bs, err := client.CallBidiStream[Word, Word](ctx, c, "Chat", "Echo")
	if err != nil {
		t.Fatal(err)
	}
	for i := range echoWords {
		if err := bs.Send(&Word{S: string(rune('a' + i))}); err != nil {
			t.Fatal(err)
		}
		if _, err := bs.Receive(); err != nil {
			t.Fatal(err)
		}
	}
	if err := bs.CloseRequest(); err != nil {
		t.Fatal(err)
	}
	if _, err := bs.Receive(); err != io.EOF {
		t.Fatalf("Echo's end: %v", err)
	}
	ss, err := client.CallServerStream[Word, Word](ctx, c, "Chat", "Spell", &Word{S: spellWord})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for ss.Receive() {
		n++
	}
	if err := ss.Err(); err != nil || n != len(spellWord) {
		t.Fatalf("Spell: %d messages, %v", n, err)
	}
	for range httpCalls {
		resp, err := http.Post("http://"+addr+"/Arith/Add", "application/json", strings.NewReader(`{"A":1,"B":2}`))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "3" {
			t.Fatalf("HTTP/JSON Arith.Add: %d %s", resp.StatusCode, b)
		}
	}
	http.DefaultClient.CloseIdleConnections()
}

// TestStreamAndGatewayMetrics: streams are counted as started and
// handled, with their messages each way, by type, on the server and on
// the client; calls through the gateway's HTTP/JSON side are counted under
// route "http", apart from the native ones.
func TestStreamAndGatewayMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	sm, cm := fleetprom.NewServerMetrics(), fleetprom.NewClientMetrics()
	reg.MustRegister(sm, cm)
	exercise(t, serveGateway(t, server.New(sm.Option())), cm.Option())

	fams := families(t, reg)
	echo := map[string]string{"service": "Chat", "method": "Echo", "route": "native", "type": "bidi_stream"}
	spell := map[string]string{"service": "Chat", "method": "Spell", "route": "native", "type": "server_stream"}
	httpAdd := map[string]string{"service": "Arith", "method": "Add", "route": "http", "type": "unary"}
	with := func(l map[string]string, k, v string) map[string]string {
		o := map[string]string{k: v}
		for a, b := range l {
			o[a] = b
		}
		return o
	}
	checks := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"fleet_server_started_total", echo, 1},
		{"fleet_server_handled_total", with(echo, "code", "ok"), 1},
		{"fleet_server_msg_received_total", echo, echoWords},
		{"fleet_server_msg_sent_total", echo, echoWords},
		{"fleet_server_started_total", spell, spellCalls},
		{"fleet_server_msg_received_total", spell, 1},
		{"fleet_server_msg_sent_total", spell, float64(len(spellWord))},
		{"fleet_server_started_total", httpAdd, httpCalls},
		{"fleet_server_handled_total", with(httpAdd, "code", "ok"), httpCalls},
		{"fleet_server_started_total", map[string]string{"service": "Arith", "method": "Add", "route": "native", "type": "unary"}, 0},
		{"fleet_client_started_total", map[string]string{"service": "Chat", "method": "Echo"}, 1},
		{"fleet_client_handled_total", map[string]string{"service": "Chat", "method": "Echo", "code": "ok"}, 1},
		{"fleet_client_msg_sent_total", map[string]string{"service": "Chat", "method": "Echo"}, echoWords},
		{"fleet_client_msg_received_total", map[string]string{"service": "Chat", "method": "Echo"}, echoWords},
		{"fleet_client_handled_total", map[string]string{"service": "Chat", "method": "Spell", "code": "ok"}, spellCalls},
		{"fleet_client_msg_sent_total", map[string]string{"service": "Chat", "method": "Spell"}, 1},
		{"fleet_client_msg_received_total", map[string]string{"service": "Chat", "method": "Spell"}, float64(len(spellWord))},
	}
	for _, ck := range checks {
		if got := counter(t, fams, ck.name, ck.labels); got != ck.want {
			t.Errorf("%s%v = %v, want %v", ck.name, ck.labels, got, ck.want)
		}
	}
	if h := find(fams, "fleet_server_handling_seconds", echo).GetHistogram(); h.GetSampleCount() != 1 {
		t.Errorf("handling time of Chat.Echo: %d samples, want 1", h.GetSampleCount())
	}
	if g := find(fams, "fleet_server_in_flight", echo).GetGauge().GetValue(); g != 0 {
		t.Errorf("Chat.Echo in flight after its end = %v", g)
	}
	if m := find(fams, "fleet_server_msg_sent_total", httpAdd); m != nil {
		t.Errorf("unary calls have message series: %v", m)
	}
}
