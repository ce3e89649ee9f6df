package server_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/compress"
	"github.com/fleetrpc/fleet/internal/benchpb"
	"github.com/fleetrpc/fleet/internal/testutil"
	"github.com/fleetrpc/fleet/server"
)

// typedServer serves a handful of Handle methods under "T", next to the
// reflective Arithmetic under "Arithmetic".
func typedServer(t *testing.T, opts ...server.Option) (*server.Server, chan string, string) {
	t.Helper()
	// The Panic method logs a stack trace; keep it out of the test output.
	srv := server.New(append([]server.Option{server.WithLogger(slog.New(slog.DiscardHandler))}, opts...)...)
	notes := make(chan string, 4)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(server.Handle(srv, "T", "Upper", func(ctx context.Context, in *Msg, out *Msg) error {
		out.S = strings.ToUpper(in.S)
		return nil
	}))
	must(server.Handle(srv, "T", "Say", func(ctx context.Context, in *benchpb.BenchmarkMessage, out *benchpb.BenchmarkMessage) error {
		benchpb.Echo(out, in)
		return nil
	}))
	must(server.Handle(srv, "T", "Raw", func(ctx context.Context, in *[]byte, out *[]byte) error {
		*out = append([]byte("raw:"), *in...)
		return nil
	}))
	must(server.Handle(srv, "T", "Count", func(ctx context.Context, in *[]string, out *map[string]int) error {
		for _, s := range *in {
			(*out)[s]++ // the map reply arrives made
		}
		return nil
	}))
	must(server.Handle(srv, "T", "Empty", func(ctx context.Context, in *int, out *[]int) error {
		if *out == nil {
			return errors.New("slice reply is nil")
		}
		for i := range *in {
			*out = append(*out, i)
		}
		return nil
	}))
	must(server.Handle(srv, "T", "Deny", func(ctx context.Context, in *Msg, out *Msg) error {
		return fleet.NewError(fleet.PermissionDenied, "not you: "+in.S)
	}))
	must(server.Handle(srv, "T", "Plain", func(ctx context.Context, in *Msg, out *Msg) error {
		return errors.New("plain failure")
	}))
	must(server.Handle(srv, "T", "Panic", func(ctx context.Context, in *Msg, out *Msg) error {
		panic("typed boom")
	}))
	must(server.Handle(srv, "T", "Block", func(ctx context.Context, in *Msg, out *Msg) error {
		if _, ok := ctx.Deadline(); !ok {
			return errors.New("no deadline")
		}
		<-ctx.Done()
		notes <- "block done: " + ctx.Err().Error()
		return ctx.Err()
	}))
	must(server.Handle(srv, "T", "Meta", func(ctx context.Context, in *Msg, out *Msg) error {
		md := fleet.IncomingMetadata(ctx)
		info := fleet.CallInfoFrom(ctx)
		out.S = md["k"] + "|" + info.Service + "." + info.Method
		fleet.SetResponseMetadata(ctx, "back", "v-"+md["k"])
		return nil
	}))
	must(server.Handle(srv, "T", "Note", func(ctx context.Context, in *Msg, _ *struct{}) error {
		notes <- in.S
		return nil
	}))
	must(srv.Register(new(Arithmetic)))
	return srv, notes, testutil.Serve(t, srv)
}

func TestHandleCodecs(t *testing.T) {
	_, _, addr := typedServer(t)
	plain := []codec.ID{codec.JSON, codec.MsgPack, codec.Gob}
	for _, cd := range plain {
		for _, cp := range []compress.ID{compress.None, compress.Zstd} {
			t.Run(fmt.Sprintf("codec%d/comp%d", cd, cp), func(t *testing.T) {
				c := dial(t, addr, client.WithCodec(cd), client.WithCompression(cp, 1))
				var out Msg
				if err := c.Call(context.Background(), "T", "Upper", &Msg{"héllo"}, &out); err != nil || out.S != "HÉLLO" {
					t.Fatalf("Upper: %v %q", err, out.S)
				}
				counts := map[string]int{}
				if err := c.Call(context.Background(), "T", "Count", []string{"a", "b", "a"}, &counts); err != nil || counts["a"] != 2 || counts["b"] != 1 {
					t.Fatalf("Count: %v %v", err, counts)
				}
				var ints []int
				if err := c.Call(context.Background(), "T", "Empty", 3, &ints); err != nil || len(ints) != 3 || ints[2] != 2 {
					t.Fatalf("Empty: %v %v", err, ints)
				}
			})
		}
	}
	t.Run("protobuf", func(t *testing.T) {
		c := dial(t, addr, client.WithCodec(codec.Protobuf))
		out := new(benchpb.BenchmarkMessage)
		if err := c.Call(context.Background(), "T", "Say", benchpb.New(), out); err != nil || out.GetField1() != "OK" || out.GetField2() != 100 {
			t.Fatalf("Say: %v %v", err, out)
		}
	})
	t.Run("raw", func(t *testing.T) {
		c := dial(t, addr) // []byte picks the raw codec
		var out []byte
		if err := c.Call(context.Background(), "T", "Raw", []byte("x"), &out); err != nil || string(out) != "raw:x" {
			t.Fatalf("Raw: %v %q", err, out)
		}
	})
}

func TestHandleErrors(t *testing.T) {
	_, _, addr := typedServer(t)
	c := dial(t, addr)
	for _, tc := range []struct {
		method string
		code   fleet.Code
		msg    string
	}{
		{"Deny", fleet.PermissionDenied, "not you: bob"},
		{"Plain", fleet.Unknown, "plain failure"},
		{"Panic", fleet.Internal, "typed boom"},
		{"Missing", fleet.NotFound, "Missing"},
	} {
		err := c.Call(context.Background(), "T", tc.method, &Msg{"bob"}, &Msg{})
		if fleet.CodeOf(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: err = %v, want code %v and %q", tc.method, err, tc.code, tc.msg)
		}
	}
	// Undecodable arguments fail that call only.
	err := c.Call(context.Background(), "T", "Upper", []byte{0xc1}, &Msg{})
	if fleet.CodeOf(err) != fleet.InvalidArgument {
		t.Errorf("undecodable args: %v, want InvalidArgument", err)
	}
	var out Msg
	if err := c.Call(context.Background(), "T", "Upper", &Msg{"still"}, &out); err != nil || out.S != "STILL" {
		t.Errorf("after errors: %v %q", err, out.S)
	}
}

func TestHandleDeadline(t *testing.T) {
	_, notes, addr := typedServer(t)
	c := dial(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := c.Call(ctx, "T", "Block", &Msg{}, &Msg{}); fleet.CodeOf(err) != fleet.DeadlineExceeded {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	select {
	case n := <-notes:
		if n != "block done: "+context.DeadlineExceeded.Error() {
			t.Fatalf("handler saw %q", n)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("handler ctx never done")
	}
}

func TestHandleMetadataAndOneway(t *testing.T) {
	_, notes, addr := typedServer(t)
	c := dial(t, addr)
	var back fleet.Metadata
	ctx := fleet.WithOutgoingMetadata(context.Background(), fleet.Metadata{"k": "v1"})
	ctx = fleet.WithResponseMetadata(ctx, &back)
	var out Msg
	if err := c.Call(ctx, "T", "Meta", &Msg{}, &out); err != nil {
		t.Fatal(err)
	}
	if out.S != "v1|T.Meta" || back["back"] != "v-v1" {
		t.Fatalf("handler saw %q, client got back %v", out.S, back)
	}
	if err := c.Send(context.Background(), "T", "Note", &Msg{"oneway"}); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-notes:
		if n != "oneway" {
			t.Fatalf("oneway got %q", n)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("oneway call never ran")
	}
}

func TestHandleInterceptorSeesTypedValues(t *testing.T) {
	seen := make(chan string, 8)
	ic := around(func(ctx context.Context, info *fleet.CallInfo, args, reply any, next server.UnaryFunc) error {
		seen <- fmt.Sprintf("%s %T %T", info.Method, args, reply)
		switch info.Method {
		case "Swap":
			return next(ctx, info, &Pair{}, reply) // the wrong type for T.Upper
		case "Mul":
			return next(ctx, info, &Msg{}, reply) // the wrong type for Arithmetic.Mul
		}
		return next(ctx, info, args, reply)
	})
	srv := server.New(server.WithInterceptor(ic))
	upper := func(ctx context.Context, in *Msg, out *Msg) error {
		out.S = strings.ToUpper(in.S)
		return nil
	}
	if err := server.Handle(srv, "T", "Upper", upper); err != nil {
		t.Fatal(err)
	}
	if err := server.Handle(srv, "T", "Swap", upper); err != nil {
		t.Fatal(err)
	}
	if err := srv.Register(new(Arithmetic)); err != nil {
		t.Fatal(err)
	}
	c := dial(t, testutil.Serve(t, srv))
	var out Msg
	if err := c.Call(context.Background(), "T", "Upper", &Msg{"a"}, &out); err != nil || out.S != "A" {
		t.Fatalf("Upper: %v %q", err, out.S)
	}
	if got := <-seen; got != "Upper *server_test.Msg *server_test.Msg" {
		t.Errorf("interceptor saw %q", got)
	}
	var sum Sum
	if err := c.Call(context.Background(), "Arithmetic", "Add", Pair{1, 2}, &sum); err != nil || sum.C != 3 {
		t.Fatalf("Add: %v %v", err, sum)
	}
	if got := <-seen; got != "Add *server_test.Pair *server_test.Sum" {
		t.Errorf("interceptor saw %q", got)
	}
	err := c.Call(context.Background(), "T", "Swap", &Msg{"a"}, &out)
	if fleet.CodeOf(err) != fleet.Internal || !strings.Contains(err.Error(), "*server_test.Pair") {
		t.Errorf("args of the wrong type: %v, want Internal naming the type", err)
	}
	<-seen
	err = c.Call(context.Background(), "Arithmetic", "Mul", &Pair{1, 2}, &sum)
	if fleet.CodeOf(err) != fleet.Internal || !strings.Contains(err.Error(), "*server_test.Msg") {
		t.Errorf("reflective method, args of the wrong type: %v, want Internal naming the type", err)
	}
	<-seen
}

func TestHandleRegistration(t *testing.T) {
	srv := server.New()
	fn := func(ctx context.Context, in *Msg, out *Msg) error { return nil }
	if err := server.Handle(srv, "T", "A", fn); err != nil {
		t.Fatal(err)
	}
	if err := server.Handle(srv, "T", "A", fn); err == nil {
		t.Error("registered T.A twice")
	}
	if err := server.Handle[Msg, Msg](srv, "T", "B", nil); err == nil {
		t.Error("registered a nil function")
	}
	if err := server.Handle(srv, "", "C", fn); err == nil {
		t.Error("registered an empty service name")
	}
	if err := server.Handle(srv, "T", "", fn); err == nil {
		t.Error("registered an empty method name")
	}
	// Handle adds to a service that Register made, and the other way round.
	if err := srv.RegisterName("Arith", new(Arithmetic)); err != nil {
		t.Fatal(err)
	}
	if err := server.Handle(srv, "Arith", "Extra", fn); err != nil {
		t.Fatal(err)
	}
	if err := server.Handle(srv, "Arith", "Add", fn); err == nil {
		t.Error("Handle replaced a registered method")
	}
	if got := srv.Services()["Arith"]; len(got) != 7 {
		t.Errorf("Arith methods = %v", got)
	}
}
