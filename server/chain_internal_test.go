package server

import (
	"context"
	"testing"

	"github.com/fleetrpc/fleet"
)

// TestChainBuiltOnce: a method's chain is built when it is registered,
// runs the interceptors in order around the handler, each seeing the
// call's info, and running it allocates nothing per call (a plain
// context, not the call's, at that).
func TestChainBuiltOnce(t *testing.T) {
	var order []byte
	wraps := 0
	mk := func(name byte) Interceptor {
		return UnaryInterceptorFunc(func(next UnaryFunc) UnaryFunc {
			wraps++
			return func(ctx context.Context, info *fleet.CallInfo, args, reply any) error {
				if info == nil || info.Method != "M" {
					t.Errorf("interceptor %c got info %+v", name, info)
				}
				order = append(order, name)
				return next(ctx, info, args, reply)
			}
		})
	}
	s := New(WithInterceptor(mk('a'), mk('b')), WithInterceptor(mk('c')))
	builtins := wraps
	if err := Handle(s, "S", "M", func(ctx context.Context, args *int, reply *int) error {
		order = append(order, 'h')
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if wraps-builtins != 3 {
		t.Fatalf("registering one method wrapped it %d times, want 3 (once per interceptor)", wraps-builtins)
	}
	m := (*s.services.Load())["S"].methods["M"]
	info := &fleet.CallInfo{Service: "S", Method: "M"}
	var a, r int
	ctx := context.Background()
	if err := m.chain(ctx, info, &a, &r); err != nil || string(order) != "abch" {
		t.Fatalf("chain ran %q, %v; want \"abch\"", order, err)
	}
	order = make([]byte, 0, 1024)
	if n := testing.AllocsPerRun(100, func() {
		order = order[:0]
		_ = m.chain(ctx, info, &a, &r)
	}); n != 0 {
		t.Fatalf("running the chain allocates %v times per call, want 0", n)
	}
	if wraps-builtins != 3 {
		t.Fatalf("calls wrapped the method again: %d wraps", wraps-builtins)
	}
}
