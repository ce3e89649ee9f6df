package server_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/internal/testutil"
	"github.com/fleetrpc/fleet/server"
)

type ctxTag struct{}

// TestServerInterceptorChainOrder: interceptors run in the order added,
// the first outermost, around two-way and oneway calls alike; each sees
// the call's info, values an outer one put on the context, and the
// handler's result; one may reject a call without running the handler.
func TestServerInterceptorChainOrder(t *testing.T) {
	var mu sync.Mutex
	var log []string
	rec := func(s string) { mu.Lock(); log = append(log, s); mu.Unlock() }
	take := func() []string { mu.Lock(); defer mu.Unlock(); got := log; log = nil; return got }
	mk := func(name string) server.Interceptor {
		return func(ctx context.Context, info *fleet.CallInfo, args, reply any, next server.Handler) error {
			tag, _ := ctx.Value(ctxTag{}).(string)
			rec(fmt.Sprintf("%s>%s.%s oneway=%v tag=%s", name, info.Service, info.Method, info.Oneway, tag))
			if info.Method == "Reject" && name == "B" {
				return fleet.NewError(fleet.PermissionDenied, "rejected by B")
			}
			err := next(context.WithValue(ctx, ctxTag{}, tag+name), args, reply)
			rec(fmt.Sprintf("%s<%v", name, fleet.CodeOf(err)))
			return err
		}
	}
	done := make(chan struct{}, 1)
	srv := server.New(server.WithInterceptor(mk("A"), mk("B")), server.WithInterceptor(mk("C")))
	handler := func(ctx context.Context, in *Msg, out *Msg) error {
		tag, _ := ctx.Value(ctxTag{}).(string)
		rec("handler tag=" + tag)
		out.S = in.S
		if fleet.CallInfoFrom(ctx).Oneway {
			done <- struct{}{}
		}
		return nil
	}
	srv.RegisterFunction("S", "Echo", handler)
	srv.RegisterFunction("S", "Note", handler)
	srv.RegisterFunction("S", "Reject", handler)
	addr := testutil.Serve(t, srv)
	c := dial(t, addr)

	tests := []struct {
		name string
		run  func() error
		want []string
	}{
		{"two-way", func() error { return c.Call(context.Background(), "S", "Echo", &Msg{S: "x"}, &Msg{}) },
			[]string{"A>S.Echo oneway=false tag=", "B>S.Echo oneway=false tag=A", "C>S.Echo oneway=false tag=AB", "handler tag=ABC", "C<ok", "B<ok", "A<ok"}},
		{"oneway", func() error {
			if err := c.Send(context.Background(), "S", "Note", &Msg{S: "y"}); err != nil {
				return err
			}
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				return fmt.Errorf("oneway handler never ran")
			}
			// The handler signalled before returning: wait for the chain to unwind.
			deadline := time.Now().Add(20 * time.Second)
			for time.Now().Before(deadline) {
				mu.Lock()
				n := len(log)
				mu.Unlock()
				if n >= 7 {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			return nil
		}, []string{"A>S.Note oneway=true tag=", "B>S.Note oneway=true tag=A", "C>S.Note oneway=true tag=AB", "handler tag=ABC", "C<ok", "B<ok", "A<ok"}},
		{"rejected", func() error {
			err := c.Call(context.Background(), "S", "Reject", &Msg{}, &Msg{})
			if fleet.CodeOf(err) != fleet.PermissionDenied {
				return fmt.Errorf("Reject = %v, want permission_denied", err)
			}
			return nil
		}, []string{"A>S.Reject oneway=false tag=", "B>S.Reject oneway=false tag=A", "A<permission_denied"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			take()
			if err := tt.run(); err != nil {
				t.Fatal(err)
			}
			if got := take(); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("chain ran\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

// TestInterceptorWithForeignContext: an interceptor that passes on a
// context not derived from the call's gets an Internal error, not a panic.
func TestInterceptorWithForeignContext(t *testing.T) {
	srv := server.New(server.WithInterceptor(func(ctx context.Context, info *fleet.CallInfo, args, reply any, next server.Handler) error {
		return next(context.Background(), args, reply)
	}))
	srv.RegisterFunction("S", "Echo", func(ctx context.Context, in *Msg, out *Msg) error { return nil })
	c := dial(t, testutil.Serve(t, srv))
	if err := c.Call(context.Background(), "S", "Echo", &Msg{}, &Msg{}); fleet.CodeOf(err) != fleet.Internal {
		t.Fatalf("Call = %v, want internal", err)
	}
}
