package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/internal/testutil"
	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/registry/static"
	"github.com/fleetrpc/fleet/server"
)

type valueRecv struct{ prefix string }

// Greet has a value receiver: it takes the reflective slow path.
func (v valueRecv) Greet(ctx context.Context, in *Msg, out *Msg) error {
	out.S = v.prefix + in.S
	return nil
}

func TestRegistrationForms(t *testing.T) {
	srv := server.New()
	if err := srv.RegisterName("Calc", new(Arith)); err != nil {
		t.Fatal(err)
	}
	if err := srv.Alias("Calc", "Multiply", "Mul"); err != nil {
		t.Fatal(err)
	}
	if err := srv.RegisterFunction("Calc", "Add", func(args *Args, reply *int) error { *reply = args.A + args.B; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := srv.RegisterName("Greeter", valueRecv{prefix: "hi "}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []any{nil, struct{}{}, func() {}} {
		if err := srv.RegisterName("Bad", bad); err == nil {
			t.Errorf("registered %T", bad)
		}
	}
	if err := srv.RegisterName("Calc", new(Arith)); err == nil {
		t.Error("registered a service name twice")
	}
	if err := srv.RegisterFunction("Calc", "Bad", func(a int) error { return nil }); err == nil {
		t.Error("registered a function of the wrong form")
	}
	if err := srv.Alias("Calc", "Nope", "X"); err == nil {
		t.Error("aliased an unknown method")
	}
	c := dial(t, testutil.Serve(t, srv))
	ctx := context.Background()
	var n int
	if err := c.Call(ctx, "Calc", "Mul", &Args{6, 7}, &n); err != nil || n != 42 {
		t.Fatalf("alias: %v %d", err, n)
	}
	if err := c.Call(ctx, "Calc", "Add", &Args{6, 7}, &n); err != nil || n != 13 {
		t.Fatalf("function: %v %d", err, n)
	}
	var out Msg
	if err := c.Call(ctx, "Greeter", "Greet", &Msg{"bob"}, &out); err != nil || out.S != "hi bob" {
		t.Fatalf("value receiver: %v %q", err, out.S)
	}
	got := srv.Services()["Calc"]
	if len(got) != 4 { // Add, Divide, Mul, Multiply
		t.Fatalf("Calc methods %v", got)
	}
}

func TestUndecodableArgs(t *testing.T) {
	_, _, addr := newServer(t)
	c := dial(t, addr)
	// Raw-codec bytes for a method whose arguments are a struct: undecodable.
	err := c.Call(context.Background(), "Svc", "Echo", []byte{0xc1, 0xc1}, &[]byte{})
	if fleet.CodeOf(err) != fleet.InvalidArgument {
		t.Fatalf("err = %v, want InvalidArgument", err)
	}
	if err := c.Call(context.Background(), "Svc", "Echo", &Msg{"fine"}, &Msg{}); err != nil {
		t.Fatal(err)
	}
}

func TestPublishReportsLoad(t *testing.T) {
	tab, err := static.NewTable(static.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv, _, addr := newServer(t)
	in := registry.Instance{Service: "Svc", Addr: addr}
	if err := srv.Publish(context.Background(), tab.Registrar(), in, server.PublishConfig{LoadInterval: 20 * time.Millisecond, DrainDelay: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	disc := tab.Discovery()
	deadline := time.Now().Add(20 * time.Second)
	for {
		for i := 0; i < 50; i++ {
			c.Call(context.Background(), "Svc", "Echo", &Msg{}, &Msg{})
		}
		list, err := disc.Instances(context.Background(), "Svc")
		if err != nil {
			t.Fatal(err)
		}
		// The p99 of the interval's calls comes with them.
		if len(list) == 1 && list[0].Load.CallsPerSecond > 0 && list[0].Load.P99Ms > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("load never published: %+v", list)
		}
		time.Sleep(20 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if list, _ := disc.Instances(context.Background(), "Svc"); len(list) != 0 {
		t.Fatalf("still registered after Shutdown: %+v", list)
	}
}

// TestPublishReportsP99OfInvoke: calls that come through Invoke (the
// gateway's path) are measured too: the published p99 becomes positive.
func TestPublishReportsP99OfInvoke(t *testing.T) {
	tab, err := static.NewTable(static.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv, _, addr := newServer(t)
	in := registry.Instance{Service: "Svc", Addr: addr}
	if err := srv.Publish(context.Background(), tab.Registrar(), in, server.PublishConfig{LoadInterval: 20 * time.Millisecond, DrainDelay: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	js := codec.JSONCodec{}
	disc := tab.Discovery()
	deadline := time.Now().Add(20 * time.Second)
	for {
		for range 50 {
			if _, _, err := srv.Invoke(context.Background(), &server.Call{Service: "Svc", Method: "Echo", Codec: js, Payload: []byte(`{"S":"x"}`)}); err != nil {
				t.Fatal(err)
			}
		}
		list, err := disc.Instances(context.Background(), "Svc")
		if err != nil {
			t.Fatal(err)
		}
		if len(list) == 1 && list[0].Load.P99Ms > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no p99 published: %+v", list)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
