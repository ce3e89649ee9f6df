package client_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/internal/testutil"
	"github.com/fleetrpc/fleet/server"
)

// TestInterceptorsWrapCallGoAndSend: the same chain, in the order added,
// runs around Call, Go and Send, and sees each call's outcome.
func TestInterceptorsWrapCallGoAndSend(t *testing.T) {
	sent := make(chan int, 1)
	srv := server.New()
	srv.RegisterFunction("T", "Echo", func(ctx context.Context, in *Req, out *Req) error {
		fleet.SetResponseMetadata(ctx, "seen", "yes")
		out.N = in.N
		return nil
	})
	srv.RegisterFunction("T", "Fail", func(ctx context.Context, in *Req, out *Req) error {
		return fleet.NewError(fleet.Aborted, "no")
	})
	srv.RegisterFunction("T", "Note", func(ctx context.Context, in *Req, _ *struct{}) error {
		sent <- in.N
		return nil
	})
	addr := testutil.Serve(t, srv)

	var mu sync.Mutex
	var log []string
	lock := func(f func()) { mu.Lock(); f(); mu.Unlock() }
	c, err := client.Dial(context.Background(), "tcp", addr, client.WithInterceptor(
		around(func(ctx context.Context, s, m string, a, r any, inv client.Invoker) error {
			lock(func() { log = append(log, fmt.Sprintf("A>%s.%s reply=%v", s, m, r != nil)) })
			err := inv(ctx, s, m, a, r)
			lock(func() { log = append(log, fmt.Sprintf("A<%v", fleet.CodeOf(err))) })
			return err
		}),
		around(func(ctx context.Context, s, m string, a, r any, inv client.Invoker) error {
			lock(func() { log = append(log, "B>") })
			err := inv(ctx, s, m, a, r)
			lock(func() { log = append(log, "B<") })
			return err
		}),
	))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	take := func() []string {
		mu.Lock()
		defer mu.Unlock()
		got := log
		log = nil
		return got
	}
	tests := []struct {
		name string
		run  func(t *testing.T)
		want []string
	}{
		{"Call", func(t *testing.T) {
			var out Req
			if err := c.Call(context.Background(), "T", "Echo", &Req{N: 1}, &out); err != nil || out.N != 1 {
				t.Fatalf("Call = %v, %v", out, err)
			}
		}, []string{"A>T.Echo reply=true", "B>", "B<", "A<ok"}},
		{"Go", func(t *testing.T) {
			var out Req
			var md fleet.Metadata
			ctx := fleet.WithResponseMetadata(context.Background(), &md)
			call := c.Go(ctx, "T", "Echo", &Req{N: 2}, &out, nil)
			select {
			case <-call.Done:
			case <-time.After(20 * time.Second):
				t.Fatal("Go call did not complete")
			}
			if call.Error != nil || out.N != 2 {
				t.Fatalf("Go = %v, %v", out, call.Error)
			}
			if call.ResponseMetadata["seen"] != "yes" || md["seen"] != "yes" {
				t.Fatalf("Go response metadata: call %v, sink %v", call.ResponseMetadata, md)
			}
		}, []string{"A>T.Echo reply=true", "B>", "B<", "A<ok"}},
		{"Go error", func(t *testing.T) {
			call := <-c.Go(context.Background(), "T", "Fail", &Req{}, &Req{}, nil).Done
			if fleet.CodeOf(call.Error) != fleet.Aborted {
				t.Fatalf("Go error = %v, want aborted", call.Error)
			}
		}, []string{"A>T.Fail reply=true", "B>", "B<", "A<aborted"}},
		{"Send", func(t *testing.T) {
			if err := c.Send(context.Background(), "T", "Note", &Req{N: 3}); err != nil {
				t.Fatal(err)
			}
			select {
			case n := <-sent:
				if n != 3 {
					t.Fatalf("server got %d, want 3", n)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("oneway call never reached the server")
			}
		}, []string{"A>T.Note reply=false", "B>", "B<", "A<ok"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			take()
			tt.run(t)
			got := take()
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("interceptors ran %q, want %q", got, tt.want)
			}
		})
	}
}

// TestInterceptorCanRejectGoAndSend: an interceptor that does not call
// invoke fails Go and Send without anything reaching the server.
func TestInterceptorCanRejectGoAndSend(t *testing.T) {
	var ran atomic.Int64
	srv := server.New()
	srv.RegisterFunction("T", "Echo", func(ctx context.Context, in *Req, out *Req) error {
		ran.Add(1)
		return nil
	})
	addr := testutil.Serve(t, srv)
	deny := fleet.NewError(fleet.PermissionDenied, "denied by interceptor")
	c, err := client.Dial(context.Background(), "tcp", addr, client.WithInterceptor(
		around(func(ctx context.Context, s, m string, a, r any, inv client.Invoker) error { return deny })))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Send(context.Background(), "T", "Echo", &Req{}); !errors.Is(err, deny) {
		t.Fatalf("Send = %v, want the interceptor's error", err)
	}
	call := <-c.Go(context.Background(), "T", "Echo", &Req{}, &Req{}, nil).Done
	if !errors.Is(call.Error, deny) {
		t.Fatalf("Go = %v, want the interceptor's error", call.Error)
	}
	if err := c.Call(context.Background(), "T", "Echo", &Req{}, &Req{}); !errors.Is(err, deny) {
		t.Fatalf("Call = %v, want the interceptor's error", err)
	}
	if n := ran.Load(); n != 0 {
		t.Fatalf("handler ran %d times, want 0", n)
	}
}

// around adapts a function that runs around the rest of the chain to a
// unary-only Interceptor.
func around(f func(ctx context.Context, service, method string, args, reply any, next client.Invoker) error) client.Interceptor {
	return client.UnaryInterceptorFunc(func(next client.Invoker) client.Invoker {
		return func(ctx context.Context, service, method string, args, reply any) error {
			return f(ctx, service, method, args, reply, next)
		}
	})
}

// wrapCounter counts how often a client wraps its chains with it.
type wrapCounter struct{ unary, stream atomic.Int64 }

func (w *wrapCounter) WrapUnary(next client.Invoker) client.Invoker {
	w.unary.Add(1)
	return next
}

func (w *wrapCounter) WrapStream(next client.StreamFunc) client.StreamFunc {
	w.stream.Add(1)
	return next
}

// TestInterceptorWrappedOncePerClient: a Client wraps its chains when it
// is made (the unary chain twice: Call and Go, and Send; the stream chain
// once), never per call or per stream.
func TestInterceptorWrappedOncePerClient(t *testing.T) {
	srv := server.New()
	srv.RegisterFunction("T", "Echo", func(ctx context.Context, in *Req, out *Req) error { out.N = in.N; return nil })
	server.HandleServerStream(srv, "T", "Count", func(ctx context.Context, in *Req, st *server.ServerStream[Req]) error {
		for i := range in.N {
			if err := st.Send(&Req{N: i}); err != nil {
				return err
			}
		}
		return nil
	})
	w := &wrapCounter{}
	c, err := client.Dial(context.Background(), "tcp", testutil.Serve(t, srv), client.WithInterceptor(w))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 3 {
		var out Req
		if err := c.Call(context.Background(), "T", "Echo", &Req{N: i}, &out); err != nil || out.N != i {
			t.Fatalf("Call: %v %v", out, err)
		}
		st, err := client.CallServerStream[Req, Req](context.Background(), c, "T", "Count", &Req{N: 2})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for st.Receive() {
			n++
		}
		st.Close()
		if st.Err() != nil || n != 2 {
			t.Fatalf("stream: %d messages, %v", n, st.Err())
		}
	}
	if u, s := w.unary.Load(), w.stream.Load(); u != 2 || s != 1 {
		t.Fatalf("wrapped the unary chain %d times and the stream chain %d times, want 2 and 1", u, s)
	}
}
