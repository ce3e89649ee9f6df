package server

import (
	"context"
	"testing"

	"github.com/fleetrpc/fleet"
)

// TestChainBuiltOnce: the chain composed by buildChain runs its
// interceptors in order around the final handler, each seeing the call's
// info, and running it allocates nothing per call.
func TestChainBuiltOnce(t *testing.T) {
	if buildChain(nil, nil) != nil {
		t.Fatal("buildChain without interceptors is not nil")
	}
	var order []byte
	mk := func(name byte) Interceptor {
		return func(ctx context.Context, info *fleet.CallInfo, args, reply any, next Handler) error {
			if info == nil || info.Method != "M" {
				t.Errorf("interceptor %c got info %+v", name, info)
			}
			order = append(order, name)
			return next(ctx, args, reply)
		}
	}
	h := buildChain([]Interceptor{mk('a'), mk('b'), mk('c')}, func(ctx context.Context, args, reply any) error {
		order = append(order, 'h')
		return nil
	})
	ctx := &callCtx{Context: context.Background(), info: fleet.CallInfo{Service: "S", Method: "M"}}
	if err := h(ctx, nil, nil); err != nil || string(order) != "abch" {
		t.Fatalf("chain ran %q, %v; want \"abch\"", order, err)
	}
	order = make([]byte, 0, 1024)
	if n := testing.AllocsPerRun(100, func() {
		order = order[:0]
		_ = h(ctx, nil, nil)
	}); n != 0 {
		t.Fatalf("running the chain allocates %v times per call, want 0", n)
	}
}
