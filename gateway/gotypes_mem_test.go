package gateway_test

import (
	"bytes"
	"context"
	"net"
	"runtime"
	"runtime/metrics"
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

// memShapes are requests of gateway.GTWideList whose few wire bytes stand
// for a huge Go value, each just under grpc-go's 4 MiB receive limit (the
// default MaxDecompressedSize), and the code each gets: about 2 million
// empty elements of a 336-byte struct (670 MB decoded), of pointers to it,
// or empty map entries, are past the default bound of 32 MiB; 4 million
// packed zeros (an []int of 32 MB) are within it.
func memShapes() []struct {
	name string
	body []byte
	want codes.Code
} {
	const size = 4_000_000
	empty := func(num protowire.Number) []byte {
		one := protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), nil)
		return bytes.Repeat(one, size/len(one))
	}
	packed := protowire.AppendBytes(protowire.AppendTag(nil, 5, protowire.BytesType), make([]byte, size-8))
	return []struct {
		name string
		body []byte
		want codes.Code
	}{
		{"empty elements", empty(2), codes.ResourceExhausted},
		{"empty pointer elements", empty(3), codes.ResourceExhausted},
		{"empty map entries", empty(4), codes.ResourceExhausted},
		{"packed zeros", packed, codes.OK},
	}
}

// deepGroups returns an unknown field 15 of depth nested groups.
func deepGroups(depth int) []byte {
	start := protowire.AppendTag(nil, 15, protowire.StartGroupType)
	end := protowire.AppendTag(nil, 15, protowire.EndGroupType)
	return append(bytes.Repeat(start, depth), bytes.Repeat(end, depth)...)
}

// memStats reads, with runtime/metrics, the bytes allocated on the heap
// so far and the bytes of heap objects (live and not yet swept).
func memStats() (allocated, inUse uint64) {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

// TestGRPCGoTypesDecodeBounded sends, over a real gRPC connection, the
// memShapes requests of a Go-typed method five times each, and deeply
// nested unknown groups: each shape gets its code (ResourceExhausted
// past the bound on what decoding allocates, refused as the count passes
// it), the groups InvalidArgument; measured with runtime/metrics, the
// process allocates per call at most the bound (32 MiB) and its
// allocator's rounding, plus the copies of the request on both sides,
// and its heap in use afterwards has not grown by more than 64 MiB. A
// normal call on the same connection then succeeds.
func TestGRPCGoTypesDecodeBounded(t *testing.T) {
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

	call := func(raw []byte) (int64, error) {
		req := dynamicpb.NewMessage(in)
		req.SetUnknown(raw)
		reply := dynamicpb.NewMessage(out)
		err := cc.Invoke(ctx, "/MemEcho/Count", req, reply)
		return reply.Get(out.Fields().ByName("value")).Int(), err
	}
	// A first call sets up the connection and the codec plans.
	if _, err := call(nil); err != nil {
		t.Fatal(err)
	}
	shapes := memShapes()
	const rounds = 5
	// Per call: the decoding, within the 32 MiB bound and a fifth for the
	// allocator's rounding; the request built, marshalled and framed by
	// the client (about 3 copies of 4 MB) and received and copied by the
	// server (2 more), and grpc-go's buffers: 64 MiB.
	const perCall = 64 << 20
	runtime.GC()
	allocBefore, heapBefore := memStats()
	calls := 0
	for range rounds {
		for _, s := range shapes {
			n, err := call(s.body)
			if status.Code(err) != s.want {
				t.Fatalf("%s (%d bytes): %v, want %v", s.name, len(s.body), err, s.want)
			}
			if s.want == codes.OK && n != 4_000_000-8 { // the packed zeros
				t.Fatalf("%s: counted %d", s.name, n)
			}
			calls++
		}
		for _, depth := range []int{1000, 100000} {
			if _, err := call(deepGroups(depth)); status.Code(err) != codes.InvalidArgument {
				t.Fatalf("groups %d deep: %v, want InvalidArgument", depth, err)
			}
			calls++
		}
	}
	runtime.GC()
	allocAfter, heapAfter := memStats()
	total := allocAfter - allocBefore
	grown := int64(heapAfter) - int64(heapBefore)
	t.Logf("%d calls: %d bytes allocated in total (%d per call), heap objects grew by %d", calls, total, total/uint64(calls), grown)
	if total > uint64(calls)*perCall {
		t.Fatalf("%d calls allocated %d bytes, over %d", calls, total, uint64(calls)*perCall)
	}
	if grown > 64<<20 {
		t.Fatalf("heap objects grew by %d bytes, over %d", grown, 64<<20)
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

// TestGRPCGoTypesMaxDecodeCost: a request of 300,000 packed zeros decodes
// into a 2.4 MB []int: served by default (bound 32 MiB), ResourceExhausted
// with WithMaxDecodeCost(1 MiB).
func TestGRPCGoTypesMaxDecodeCost(t *testing.T) {
	const n = 300_000
	packed := protowire.AppendBytes(protowire.AppendTag(nil, 5, protowire.BytesType), make([]byte, n))
	for _, c := range []struct {
		opts []gateway.Option
		want codes.Code
	}{
		{nil, codes.OK},
		{[]gateway.Option{gateway.WithMaxDecodeCost(1 << 20)}, codes.ResourceExhausted},
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
