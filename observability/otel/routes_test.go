package fleetotel_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/gateway"
	fleetotel "github.com/fleetrpc/fleet/observability/otel"
	"github.com/fleetrpc/fleet/server"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// TestStreamSpanAndGatewayRoute: a bidi stream runs under one server span
// with an rpc.message event per message each way (rpc.message.type SENT
// or RECEIVED, rpc.message.id from 1 each way) and its message counts in
// rpc.server.requests_per_rpc and rpc.server.responses_per_rpc; a call
// through the gateway's HTTP/JSON side has a server span and a duration
// sample with fleet.route "http", a native one "native". On the client the
// stream has a client span, the server span's parent, with the same
// events and the outcome ok.
func TestStreamSpanAndGatewayRoute(t *testing.T) {
	sr, reader, tel := recordedTelemetry(t)
	srv := server.New(tel.ServerOption())
	if err := server.HandleBidiStream(srv, "Chat", "Echo", func(ctx context.Context, st *server.BidiStream[Req, Rep]) error {
		for {
			m, err := st.Receive()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			if err := st.Send(&Rep{N: m.N}); err != nil {
				return err
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := srv.RegisterFunction("M", "Do", func(ctx context.Context, in *Req, out *Rep) error { out.N = in.N + 1; return nil }); err != nil {
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

	c := dial(t, addr, tel.ClientOption())
	bs, err := client.CallBidiStream[Req, Rep](context.Background(), c, "Chat", "Echo")
	if err != nil {
		t.Fatal(err)
	}
	const msgs = 3
	for i := range msgs {
		if err := bs.Send(&Req{N: i}); err != nil {
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
		t.Fatalf("stream end: %v", err)
	}
	var out Rep
	if err := c.Call(context.Background(), "M", "Do", &Req{N: 1}, &out); err != nil || out.N != 2 {
		t.Fatalf("native call: %+v, %v", out, err)
	}
	resp, err := http.Post("http://"+addr+"/M/Do", "application/json", strings.NewReader(`{"N":41}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"N":42`) {
		t.Fatalf("HTTP/JSON call: %d %s", resp.StatusCode, b)
	}

	spans := sr.Ended()
	st := one(t, spans, "Chat/Echo", trace.SpanKindServer)
	if a := attrs(st); a[fleetotel.RouteKey].AsString() != "native" || a[fleetotel.RPCResponseStatusCodeKey].AsString() != "ok" {
		t.Errorf("stream span attributes %v", a)
	}
	want := []string{"RECEIVED 1", "SENT 1", "RECEIVED 2", "SENT 2", "RECEIVED 3", "SENT 3"}
	if events := messageEvents(t, st); strings.Join(events, ",") != strings.Join(want, ",") {
		t.Errorf("server stream events %q, want %q", events, want)
	}
	cst := one(t, spans, "Chat/Echo", trace.SpanKindClient)
	want = []string{"SENT 1", "RECEIVED 1", "SENT 2", "RECEIVED 2", "SENT 3", "RECEIVED 3"}
	if events := messageEvents(t, cst); strings.Join(events, ",") != strings.Join(want, ",") {
		t.Errorf("client stream events %q, want %q", events, want)
	}
	if st.Parent().SpanID() != cst.SpanContext().SpanID() || attrs(cst)[fleetotel.RPCResponseStatusCodeKey].AsString() != "ok" {
		t.Errorf("client stream span %v (%v), server span's parent %v", cst.SpanContext().SpanID(), attrs(cst), st.Parent().SpanID())
	}
	routes := map[string]int{}
	for _, s := range byName(spans, "M/Do", trace.SpanKindServer) {
		routes[attrs(s)[fleetotel.RouteKey].AsString()]++
	}
	if routes["native"] != 1 || routes["http"] != 1 || len(routes) != 2 {
		t.Errorf("M/Do server spans by route: %v, want one native and one http", routes)
	}

	durByRoute := map[string]uint64{}
	durationCounts(t, reader, func(a attribute.Set) bool {
		if m, _ := a.Value("rpc.method"); m.AsString() == "Do" {
			r, _ := a.Value(fleetotel.RouteKey)
			durByRoute[r.AsString()]++
		}
		return false
	})
	if durByRoute["native"] != 1 || durByRoute["http"] != 1 {
		t.Errorf("M/Do duration data points by route: %v, want one native and one http", durByRoute)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	perRPC := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			h, ok := m.Data.(metricdata.Histogram[int64])
			if !ok {
				continue
			}
			for _, dp := range h.DataPoints {
				if v, _ := dp.Attributes.Value("rpc.method"); v.AsString() == "Echo" && dp.Count == 1 {
					perRPC[m.Name] = dp.Sum
				}
			}
		}
	}
	if perRPC["rpc.server.requests_per_rpc"] != msgs || perRPC["rpc.server.responses_per_rpc"] != msgs {
		t.Errorf("message counts per stream %v, want %d each", perRPC, msgs)
	}
}

// messageEvents returns a span's rpc.message events as "TYPE id".
func messageEvents(t *testing.T, s sdktrace.ReadOnlySpan) []string {
	t.Helper()
	var events []string
	for _, e := range s.Events() {
		if e.Name != fleetotel.MessageEvent {
			t.Errorf("event %q on the stream span", e.Name)
			continue
		}
		var typ string
		var id int64
		for _, kv := range e.Attributes {
			switch kv.Key {
			case fleetotel.RPCMessageTypeKey:
				typ = kv.Value.AsString()
			case fleetotel.RPCMessageIDKey:
				id = kv.Value.AsInt64()
			}
		}
		events = append(events, typ+" "+strconv.FormatInt(id, 10))
	}
	return events
}
