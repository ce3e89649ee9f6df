package gateway_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/gateway"
	"github.com/fleetrpc/fleet/server"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
)

// Budgeted counts the calls its handler runs.
type Budgeted struct{ ran *atomic.Int64 }

// Take returns len(A)+len(B) as a string.
func (b Budgeted) Take(ctx context.Context, in *Pair, out *string) error {
	b.ran.Add(1)
	*out = strings.Repeat("x", min(len(in.A)+len(in.B), 8))
	return nil
}

// rawGRPC is a grpc-go codec that sends and receives wire bytes as given.
type rawGRPC struct{}

func (rawGRPC) Name() string { return "proto" }
func (rawGRPC) Marshal(v any) ([]byte, error) {
	return *v.(*[]byte), nil
}
func (rawGRPC) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}

// TestDecodeChargedToBudget: with a small server memory budget
// (WithMaxPendingBytes), a call whose decoding would take more than the
// budget has free is refused with ResourceExhausted (HTTP 429, JSON-RPC
// data code ResourceExhausted, gRPC RESOURCE_EXHAUSTED) before its handler
// runs, on the three routes that decode through Invoke: HTTP/JSON and
// JSON-RPC (the JSON codec charges 16 times the text up front) and gRPC for
// a Go-typed method (the wire decoder charges what it allocates as it
// goes). A small call still runs, and the budget is back to empty after.
func TestDecodeChargedToBudget(t *testing.T) {
	const budget = 64 << 10
	var ran atomic.Int64
	srv := server.New(server.WithLogger(discard()), server.WithMaxPendingBytes(budget))
	if err := srv.RegisterName("Budgeted", Budgeted{&ran}); err != nil {
		t.Fatal(err)
	}
	g := gateway.New(srv, gateway.WithLogger(discard()))
	addr := serveGateway(t, g)
	hc := httpClient(t)

	// 8 KiB of JSON text: charged 128 KiB, twice the budget, though the
	// body itself fits.
	big, _ := json.Marshal(&Pair{A: strings.Repeat("a", 8<<10)})
	resp, body := post(t, hc, "http://"+addr+"/Budgeted/Take", string(big), nil)
	var eb errBody
	_ = json.Unmarshal(body, &eb)
	if resp.StatusCode != 429 || fleet.Code(eb.Code) != fleet.ResourceExhausted {
		t.Fatalf("HTTP/JSON over the budget: %d %s", resp.StatusCode, body)
	}

	rpc := `{"jsonrpc":"2.0","id":1,"method":"Budgeted.Take","params":` + string(big) + `}`
	_, body = post(t, hc, "http://"+addr+"/jsonrpc", rpc, nil)
	var rr struct {
		Error *struct {
			Data struct {
				Code fleet.Code `json:"code"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &rr); err != nil || rr.Error == nil || rr.Error.Data.Code != fleet.ResourceExhausted {
		t.Fatalf("JSON-RPC over the budget: %s", body)
	}

	// gRPC: field 1 (A) of 256 KiB: the payload is reserved alone (a
	// request larger than the budget runs when nothing else is held),
	// but the string decoded from it does not fit beside it.
	wire := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte(strings.Repeat("a", 256<<10)))
	var reply []byte
	err := grpcConn(t, addr).Invoke(context.Background(), "/Budgeted/Take", &wire, &reply, grpc.ForceCodec(rawGRPC{}))
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("gRPC over the budget: %v", err)
	}
	if n := ran.Load(); n != 0 {
		t.Fatalf("handler ran %d times for calls refused by the budget", n)
	}

	resp, body = post(t, hc, "http://"+addr+"/Budgeted/Take", `{"A":"ab","B":"c"}`, nil)
	if resp.StatusCode != 200 || string(body) != `"xxx"` || ran.Load() != 1 {
		t.Fatalf("small call: %d %s, ran %d", resp.StatusCode, body, ran.Load())
	}
	for _, st := range srv.AdmissionStats() {
		if st.Stage == server.StageMemory && (st.InUse != 0 || st.Refused != 3) {
			t.Fatalf("memory stage after the calls: %+v, want nothing held and 3 refused", st)
		}
	}
}
