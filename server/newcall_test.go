package server_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/internal/testutil"
	"github.com/fleetrpc/fleet/server"
)

// PairSvc has net/rpc-style methods whose replies are a map and a slice,
// which the server must make before the handler runs (args and reply come
// from one allocation per call).
type PairSvc struct{}

func (PairSvc) Count(args []string, reply *map[string]int) error {
	for _, s := range args {
		(*reply)[s]++
	}
	return nil
}

func (PairSvc) Twice(ctx context.Context, args *Msg, reply *[]string) error {
	if fleet.CallInfoFrom(ctx) == nil {
		return fleet.NewError(fleet.Internal, "no call info")
	}
	*reply = append(*reply, args.S, args.S)
	return nil
}

// TestRegisteredRepliesPrepared: map and slice replies of reflect- and
// Handle-registered methods start made and empty on every call, and calls
// do not share args or replies.
func TestRegisteredRepliesPrepared(t *testing.T) {
	srv := server.New()
	if err := srv.Register(PairSvc{}); err != nil {
		t.Fatal(err)
	}
	if err := server.Handle(srv, "Typed", "Count", func(ctx context.Context, in *[]string, out *map[string]int) error {
		for _, s := range *in {
			(*out)[s]++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	c := dial(t, testutil.Serve(t, srv))
	ctx := context.Background()
	for i := range 3 {
		for _, svc := range []string{"PairSvc", "Typed"} {
			var got map[string]int
			if err := c.Call(ctx, svc, "Count", []string{"a", "b", "a"}, &got); err != nil {
				t.Fatalf("%s.Count round %d: %v", svc, i, err)
			}
			if len(got) != 2 || got["a"] != 2 || got["b"] != 1 {
				t.Fatalf("%s.Count round %d = %v, want a:2 b:1", svc, i, got)
			}
		}
		var twice []string
		if err := c.Call(ctx, "PairSvc", "Twice", &Msg{S: "x"}, &twice); err != nil {
			t.Fatal(err)
		}
		if len(twice) != 2 || twice[0] != "x" || twice[1] != "x" {
			t.Fatalf("Twice round %d = %q, want [x x]", i, twice)
		}
	}
}

// TestInterceptorRunsHandlerConcurrently: an interceptor may run the rest
// of the chain twice at once with the call's own context (a hedging
// interceptor would); a reflect-registered handler taking a context gets
// it in both runs, with the call's info (the context's slot is lent to
// one run at a time; run with -race).
func TestInterceptorRunsHandlerConcurrently(t *testing.T) {
	fanout := around(func(ctx context.Context, info *fleet.CallInfo, args, reply any, next server.UnaryFunc) error {
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := new([]string)
				if i == 0 {
					r = reply.(*[]string)
				}
				errs[i] = next(ctx, info, args, r)
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		return nil
	})
	srv := server.New(server.WithInterceptor(fanout))
	if err := srv.Register(PairSvc{}); err != nil {
		t.Fatal(err)
	}
	c := dial(t, testutil.Serve(t, srv))
	for i := range 20 {
		var got []string
		if err := c.Call(context.Background(), "PairSvc", "Twice", &Msg{S: "y"}, &got); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if len(got) != 2 || got[0] != "y" {
			t.Fatalf("call %d = %q, want [y y]", i, got)
		}
	}
}

// TestRequestMetadataKept: a handler may keep request metadata values
// after its call (they may share the call's allocation); each kept value
// still reads as sent after many later calls with other metadata, for
// reflect- and Handle-registered methods, with and without an auth check
// (which makes the call's context first), with metadata sections that fit
// the call's allocation and that do not.
func TestRequestMetadataKept(t *testing.T) {
	for _, auth := range []bool{false, true} {
		var opts []server.Option
		if auth {
			opts = append(opts, server.WithAuth(func(ctx context.Context, info *fleet.CallInfo, token string) error { return nil }))
		}
		srv := server.New(opts...)
		var mu sync.Mutex
		// sent value (from the args, which do not share the metadata's
		// memory) → the metadata values the handler kept
		kept := map[string][2]string{}
		keep := func(ctx context.Context, sent string) {
			v, _ := fleet.CallInfoFrom(ctx).MetadataValue("v")
			w := fleet.IncomingMetadata(ctx)["w"]
			mu.Lock()
			kept[sent] = [2]string{v, w}
			mu.Unlock()
		}
		if err := srv.RegisterFunction("Reflect", "Keep", func(ctx context.Context, in *Msg, out *Msg) error {
			keep(ctx, in.S)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := server.Handle(srv, "Typed", "Keep", func(ctx context.Context, in *Msg, out *Msg) error {
			keep(ctx, in.S)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		c := dial(t, testutil.Serve(t, srv))
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 100 {
					// Short values fit the call's allocation, every
					// seventh call's do not.
					v := fmt.Sprintf("value-%d-%d", g, i)
					if i%7 == 0 {
						v += strings.Repeat("x", 100)
					}
					svc := []string{"Reflect", "Typed"}[i%2]
					ctx := fleet.AppendOutgoingMetadata(context.Background(), "v", v, "w", v)
					var out Msg
					if err := c.Call(ctx, svc, "Keep", &Msg{S: v}, &out); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		if len(kept) != 400 {
			t.Fatalf("auth %v: %d values kept, want 400", auth, len(kept))
		}
		for sent, got := range kept {
			if got[0] != sent || got[1] != sent {
				t.Errorf("auth %v: kept %q, sent %q", auth, got, sent)
			}
		}
	}
}
