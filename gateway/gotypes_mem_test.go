package gateway_test

import (
	"bytes"
	"context"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/fleetrpc/fleet/gateway"
	"github.com/fleetrpc/fleet/server"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// MemEcho counts what it was sent.
type MemEcho struct{}

func (MemEcho) Count(_ context.Context, in *gateway.GTWideList, out *int) error {
	*out = len(in.Items) + len(in.Ptrs) + len(in.ByID) + len(in.Nums)
	return nil
}

// memShapes are the adversarial requests of gateway.GTWideList, each just under
// grpc-go's 4 MiB receive limit (the default MaxDecompressedSize).
func memShapes() map[string][]byte {
	const size = 4_000_000
	empty := func(num protowire.Number) []byte {
		one := protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), nil)
		return bytes.Repeat(one, size/len(one))
	}
	packed := protowire.AppendBytes(protowire.AppendTag(nil, 5, protowire.BytesType), make([]byte, size-8))
	return map[string][]byte{
		"empty elements":         empty(2),
		"empty pointer elements": empty(3),
		"empty map entries":      empty(4),
		"packed zeros":           packed,
	}
}

// deepGroups returns an unknown field 15 of depth nested groups.
func deepGroups(depth int) []byte {
	start := protowire.AppendTag(nil, 15, protowire.StartGroupType)
	end := protowire.AppendTag(nil, 15, protowire.EndGroupType)
	return append(bytes.Repeat(start, depth), bytes.Repeat(end, depth)...)
}

// TestGRPCGoTypesDecodeCostBounded sends, over a real gRPC connection,
// requests of a Go-typed method whose few wire bytes stand for a huge
// decoded value (about 2 million empty elements of a 40-field struct, or
// of pointers to it, or empty map entries, or 4 million packed zeros):
// each is ResourceExhausted, refused before it is decoded, and five
// rounds of them all grow the process's heap (allocated in total, and in
// use after them) by less than the stated bound, which holds the request
// bytes' own copies (client and server) but not one decoded value
// (4.2 GB for the first shape without the bound: about 2,100 bytes per
// empty element, measured). Deeply nested (unknown) groups
// are InvalidArgument within the same bound. A normal call on the same
// connection then succeeds.
func TestGRPCGoTypesDecodeCostBounded(t *testing.T) {
	srv := server.New(server.WithLogger(discard()))
	if err := srv.Register(MemEcho{}); err != nil {
		t.Fatal(err)
	}
	g := gateway.New(srv, gateway.WithLogger(discard()))
	addr := serveGateway(t, g)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cc := grpcConn(t, addr)
	in, out := reflectedMethod(t, ctx, addr, "MemEcho", "Count")

	call := func(raw []byte) error {
		req := dynamicpb.NewMessage(in)
		req.SetUnknown(raw)
		return cc.Invoke(ctx, "/MemEcho/Count", req, dynamicpb.NewMessage(out))
	}
	// A first call sets up the connection and the synthesized messages.
	if err := call(nil); err != nil {
		t.Fatal(err)
	}
	shapes := memShapes()
	const rounds = 5
	// Per adversarial call: the request is built, marshalled and framed
	// by the client (about 3 copies of 4 MB) and received and copied by
	// the server (2 more), plus grpc-go's buffers: 64 MiB is generous.
	// One decoded request alone allocates about 4.2 GB.
	const perCall = 64 << 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	calls := 0
	for range rounds {
		for name, raw := range shapes {
			if err := call(raw); status.Code(err) != codes.ResourceExhausted {
				t.Fatalf("%s (%d bytes): %v, want ResourceExhausted", name, len(raw), err)
			}
			calls++
		}
		for _, depth := range []int{1000, 100000} {
			if err := call(deepGroups(depth)); status.Code(err) != codes.InvalidArgument {
				t.Fatalf("groups %d deep: %v, want InvalidArgument", depth, err)
			}
			calls++
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	total := after.TotalAlloc - before.TotalAlloc
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d calls: %d bytes allocated in total (%d per call), heap in use grew by %d", calls, total, total/uint64(calls), grown)
	if total > uint64(calls)*perCall {
		t.Fatalf("%d calls allocated %d bytes, over %d", calls, total, uint64(calls)*perCall)
	}
	if grown > 64<<20 {
		t.Fatalf("heap in use grew by %d bytes, over %d", grown, 64<<20)
	}

	// A normal call on the same connection.
	fields := in.Fields()
	req := dynamicpb.NewMessage(in)
	items := req.Mutable(fields.ByName("Items")).List()
	for range 3 {
		items.Append(items.NewElement())
	}
	nums := req.Mutable(fields.ByName("Nums")).List()
	for i := range 1000 {
		nums.Append(protoreflect.ValueOfInt64(int64(i)))
	}
	reply := dynamicpb.NewMessage(out)
	if err := cc.Invoke(ctx, "/MemEcho/Count", req, reply); err != nil {
		t.Fatalf("normal call after: %v", err)
	}
	if got := reply.Get(out.Fields().ByName("value")).Int(); got != 1003 {
		t.Fatalf("normal call after: %d, want 1003", got)
	}
}

// TestGRPCGoTypesMaxDecodeCost: a request of 300,000 packed zeros is a
// valid request whose JSON fits the 4 MiB limit, but decoding it costs
// more than the default bound (8 × 4 MiB; about 145 bytes per element,
// measured): ResourceExhausted by default, served with
// WithMaxDecodeCost raised.
func TestGRPCGoTypesMaxDecodeCost(t *testing.T) {
	const n = 300_000
	packed := protowire.AppendBytes(protowire.AppendTag(nil, 5, protowire.BytesType), make([]byte, n))
	for _, c := range []struct {
		opts []gateway.Option
		want codes.Code
	}{
		{nil, codes.ResourceExhausted},
		{[]gateway.Option{gateway.WithMaxDecodeCost(1 << 30)}, codes.OK},
	} {
		srv := server.New(server.WithLogger(discard()))
		if err := srv.Register(MemEcho{}); err != nil {
			t.Fatal(err)
		}
		g := gateway.New(srv, append(c.opts, gateway.WithLogger(discard()))...)
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- g.Serve(lis) }()
		addr := lis.Addr().String()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		in, out := reflectedMethod(t, ctx, addr, "MemEcho", "Count")
		req := dynamicpb.NewMessage(in)
		req.SetUnknown(packed)
		reply := dynamicpb.NewMessage(out)
		err = grpcConn(t, addr).Invoke(ctx, "/MemEcho/Count", req, reply)
		cancel()
		g.Close()
		<-done
		if status.Code(err) != c.want {
			t.Fatalf("%d packed zeros, options %d: %v, want %v", n, len(c.opts), err, c.want)
		}
		if c.want == codes.OK && reply.Get(out.Fields().ByName("value")).Int() != n {
			t.Fatalf("%d packed zeros: reply %v", n, reply)
		}
	}
}
