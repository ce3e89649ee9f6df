package server_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/server"
)

// chargingCodec is the JSON codec charging n bytes before it decodes.
type chargingCodec struct {
	codec.JSONCodec
	n int64
}

func (c chargingCodec) UnmarshalBudget(data []byte, v any, charge func(int64) error) error {
	if err := charge(c.n); err != nil {
		return err
	}
	return c.Unmarshal(data, v)
}

var _ codec.BudgetUnmarshaler = chargingCodec{}

// TestInvokeChargesDecode: Invoke reserves what a codec.BudgetUnmarshaler
// charges in the server's memory budget for as long as the call runs; a
// charge that does not fit beside what is held refuses the call with
// ResourceExhausted before the handler runs, and counts in the memory
// stage's Refused.
func TestInvokeChargesDecode(t *testing.T) {
	const budget = 1 << 20
	srv := server.New(server.WithMaxPendingBytes(budget))
	var ran atomic.Int64
	var heldInHandler int64
	if err := server.Handle(srv, "B", "Echo", func(ctx context.Context, in *Msg, out *Msg) error {
		ran.Add(1)
		s, _ := statOf(srv, server.StageMemory, "", "")
		heldInHandler = s.InUse
		out.S = in.S
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	payload := []byte(`{"S":"x"}`)
	invoke := func(n int64) error {
		_, _, err := srv.Invoke(context.Background(), &server.Call{Service: "B", Method: "Echo", Codec: chargingCodec{n: n}, Payload: payload})
		return err
	}
	if err := invoke(budget / 2); err != nil {
		t.Fatalf("charge within the budget: %v", err)
	}
	if want := int64(budget/2 + len(payload)); heldInHandler != want {
		t.Fatalf("held while the handler ran: %d bytes, want %d (payload and charge)", heldInHandler, want)
	}
	if err := invoke(budget); fleet.CodeOf(err) != fleet.ResourceExhausted {
		t.Fatalf("charge over the budget: %v", err)
	}
	if n := ran.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want 1 (the refused call must not run)", n)
	}
	if s, _ := statOf(srv, server.StageMemory, "", ""); s.InUse != 0 || s.Refused != 1 {
		t.Fatalf("memory stage after the calls: %+v", s)
	}
}
