package gateway_test

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/fleetrpc/fleet/gateway"
	"github.com/fleetrpc/fleet/server"
	"google.golang.org/grpc/codes"
	reflectv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// reflectedMethod asks the gateway's server reflection for the file of
// service and returns method's input and output descriptors, built from
// the reflected files alone.
func reflectedMethod(t *testing.T, ctx context.Context, addr, service, method string) (in, out protoreflect.MessageDescriptor) {
	t.Helper()
	stream, err := reflectv1.NewServerReflectionClient(grpcConn(t, addr)).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.CloseSend()
	if err := stream.Send(&reflectv1.ServerReflectionRequest{MessageRequest: &reflectv1.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: service}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	set := &descriptorpb.FileDescriptorSet{}
	for _, b := range resp.GetFileDescriptorResponse().GetFileDescriptorProto() {
		fd := &descriptorpb.FileDescriptorProto{}
		if err := proto.Unmarshal(b, fd); err != nil {
			t.Fatal(err)
		}
		set.File = append(set.File, fd)
	}
	files, err := protodesc.NewFiles(set)
	if err != nil {
		t.Fatalf("reflected files for %s: %v", service, err)
	}
	d, err := files.FindDescriptorByName(protoreflect.FullName(service))
	if err != nil {
		t.Fatal(err)
	}
	m := d.(protoreflect.ServiceDescriptor).Methods().ByName(protoreflect.Name(method))
	if m == nil {
		t.Fatalf("%s has no method %s", service, method)
	}
	return m.Input(), m.Output()
}

// TestGRPCGoTypes: methods taking and returning Go structs and builtins
// (Arith, Plain) are listed by reflection and callable by grpc-go with
// dynamicpb messages built from the reflected descriptors alone.
func TestGRPCGoTypes(t *testing.T) {
	_, addr := start(t, nil, gateway.WithProtoPackage("fleet.demo"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cc := grpcConn(t, addr)

	in, out := reflectedMethod(t, ctx, addr, "fleet.demo.Arith", "Add")
	if f := in.Fields(); f.Len() != 2 || f.Get(0).Name() != "A" || f.Get(0).Kind() != protoreflect.Int64Kind || f.Get(1).JSONName() != "B" {
		t.Fatalf("Arith.Add input %v", in)
	}
	if f := out.Fields(); f.Len() != 1 || f.Get(0).Name() != "value" {
		t.Fatalf("Arith.Add output %v", out)
	}
	call := func(path, reqJSON string, in, out protoreflect.MessageDescriptor) (string, error) {
		req := dynamicpb.NewMessage(in)
		if err := protojson.Unmarshal([]byte(reqJSON), req); err != nil {
			t.Fatal(err)
		}
		reply := dynamicpb.NewMessage(out)
		if err := cc.Invoke(ctx, path, req, reply); err != nil {
			return "", err
		}
		b, err := protojson.MarshalOptions{EmitUnpopulated: true}.Marshal(reply)
		if err != nil {
			t.Fatal(err)
		}
		return string(b), nil
	}
	for _, tc := range []struct{ path, req, want string }{
		{"/fleet.demo.Arith/Add", `{"A":1,"B":2}`, `{"value":"3"}`},
		{"/Arith/Add", `{"A":-40,"B":2}`, `{"value":"-38"}`},
		{"/Arith/Mul", `{"A":6,"B":7}`, `{"value":"42"}`},
		{"/Arith/Add", `{}`, `{"value":"0"}`},
	} {
		got, err := call(tc.path, tc.req, in, out)
		if err != nil || compactJSON(got) != tc.want {
			t.Fatalf("%s %s: %s, %v", tc.path, tc.req, got, err)
		}
	}
	if _, err := call("/Arith/Div", `{"A":1,"B":0}`, in, out); status.Code(err) != codes.Unknown || status.Convert(err).Message() != "divide by zero" {
		t.Fatalf("Div by zero: %v", err)
	}

	pin, pout := reflectedMethod(t, ctx, addr, "fleet.demo.Plain", "Join")
	if got, err := call("/Plain/Join", `{"A":"x","B":"y"}`, pin, pout); err != nil || compactJSON(got) != `{"value":"xy"}` {
		t.Fatalf("Plain.Join: %s, %v", got, err)
	}

}

// compactJSON drops the spaces protojson may put between tokens.
func compactJSON(s string) string {
	out := make([]byte, 0, len(s))
	inStr := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '"' && (i == 0 || s[i-1] != '\\') {
			inStr = !inStr
		}
		if !inStr && (c == ' ' || c == '\n') {
			continue
		}
		out = append(out, c)
	}
	return string(out)
}

// Rich holds every kind of field the Go-type mapping covers.
type Rich struct {
	Name    string `json:"name"`
	Skip    string `json:"-"`
	Small   int8
	Big     uint64
	F32     float32
	On      bool
	Raw     []byte
	Tags    []string
	When    time.Time
	Wait    time.Duration
	Inner   RichInner
	Ptr     *RichInner
	List    []RichInner
	Counts  map[string]int
	ByID    map[int32]*RichInner
	Opt     *int
	private int
}

// RichInner is Rich's nested struct.
type RichInner struct{ X, Y float64 }

// Echoes serves Rich over gRPC; Bad has a field the mapping refuses.
type Echoes struct{}

// Rich returns its argument.
func (Echoes) Rich(_ context.Context, in *Rich, out *Rich) error { *out = *in; return nil }

// Small returns its argument's V.
func (Echoes) Small(_ context.Context, in *SmallArgs, out *int8) error { *out = in.V; return nil }

// SmallArgs has a field narrower than its protobuf type (int32).
type SmallArgs struct{ V int8 }

// Floats returns its argument.
func (Echoes) Floats(_ context.Context, in *RichInner, out *RichInner) error { *out = *in; return nil }

// BoolKeys cannot be served over gRPC: the mapping refuses bool map keys.
func (Echoes) BoolKeys(_ context.Context, in *map[bool]string, out *int) error { return nil }

// Bad cannot be served over gRPC: an interface field.
func (Echoes) Bad(_ context.Context, in *struct{ V any }, out *int) error { return nil }

// TestGRPCGoTypesRoundTrip: a struct with scalars, bytes, slices, nested
// structs, pointers, maps and time values arrives intact through the
// synthesized messages and back; a method with an interface field is not
// served over gRPC (Unimplemented, not in its service's file).
func TestGRPCGoTypesRoundTrip(t *testing.T) {
	addr := serveEchoes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	in, out := reflectedMethod(t, ctx, addr, "Echoes", "Rich")
	if in.Fields().ByName("Skip") != nil || in.Fields().ByName("private") != nil || in.Fields().ByName("name") == nil {
		t.Fatalf("Rich fields: %v", in.Fields())
	}
	seven := 7
	want := Rich{
		Name: "n", Small: -3, Big: 1 << 60, F32: 1.5, On: true, Raw: []byte{0, 1, 255},
		Tags: []string{"a", "", "c"}, When: time.Date(2026, 11, 25, 17, 0, 0, 5, time.UTC), Wait: 3 * time.Second,
		Inner: RichInner{1, 2}, Ptr: &RichInner{X: 3}, List: []RichInner{{X: 4}, {Y: 5}},
		Counts: map[string]int{"a": 1, "b": -2}, ByID: map[int32]*RichInner{9: {X: 9}}, Opt: &seven,
	}
	js, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	// The request is built from the Go value's encoding/json form, as a
	// JSON-speaking gRPC client (grpcurl) would send it.
	req := dynamicpb.NewMessage(in)
	if err := protojson.Unmarshal(js, req); err != nil {
		t.Fatalf("protojson of %s: %v", js, err)
	}
	reply := dynamicpb.NewMessage(out)
	if err := grpcConn(t, addr).Invoke(ctx, "/Echoes/Rich", req, reply); err != nil {
		t.Fatal(err)
	}
	// Echo: the reply is the request, field for field (which it is only if
	// the request reached Rich intact and the reply came back intact).
	if !proto.Equal(req, reply) {
		t.Fatalf("round trip:\n got %v\nwant %v", reply, req)
	}
	if reply.Get(out.Fields().ByName("Big")).Uint() != 1<<60 || reply.Get(out.Fields().ByName("When")).String() != "2026-11-25T17:00:00.000000005Z" {
		t.Fatalf("reply %v", reply)
	}

	// A value that overflows the Go field: InvalidArgument.
	sin, sout := reflectedMethod(t, ctx, addr, "Echoes", "Small")
	small := dynamicpb.NewMessage(sin)
	small.Set(sin.Fields().ByName("V"), protoreflect.ValueOfInt32(-100))
	sreply := dynamicpb.NewMessage(sout)
	if err := grpcConn(t, addr).Invoke(ctx, "/Echoes/Small", small, sreply); err != nil || sreply.Get(sout.Fields().ByName("value")).Int() != -100 {
		t.Fatalf("Small(-100): %v %v", sreply, err)
	}
	small.Set(sin.Fields().ByName("V"), protoreflect.ValueOfInt32(300))
	if err := grpcConn(t, addr).Invoke(ctx, "/Echoes/Small", small, sreply); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("Small(300): %v", err)
	}

	err = grpcConn(t, addr).Invoke(ctx, "/Echoes/Bad", dynamicpb.NewMessage(in), dynamicpb.NewMessage(out))
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("Bad: %v", err)
	}
}

// TestGRPCGoTypesFloats: NaN and infinite floats, which have no JSON
// form, reach the handler and come back (the gateway no longer carries
// requests as JSON); a method whose type is a map with bool keys is
// Unimplemented (the mapping refuses them, as HTTP/JSON does).
func TestGRPCGoTypesFloats(t *testing.T) {
	addr := serveEchoes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cc := grpcConn(t, addr)
	in, out := reflectedMethod(t, ctx, addr, "Echoes", "Floats")
	for _, x := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), 1.5} {
		req := dynamicpb.NewMessage(in)
		req.Set(in.Fields().ByName("X"), protoreflect.ValueOfFloat64(x))
		reply := dynamicpb.NewMessage(out)
		if err := cc.Invoke(ctx, "/Echoes/Floats", req, reply); err != nil {
			t.Fatalf("X=%v: %v", x, err)
		}
		got := reply.Get(out.Fields().ByName("X")).Float()
		if math.Float64bits(got) != math.Float64bits(x) && !(math.IsNaN(x) && math.IsNaN(got)) {
			t.Fatalf("X=%v came back as %v", x, got)
		}
	}

	// The empty message is a valid request of any message type.
	err := cc.Invoke(ctx, "/Echoes/BoolKeys", dynamicpb.NewMessage(in), dynamicpb.NewMessage(out))
	if status.Code(err) != codes.Unimplemented || !strings.Contains(err.Error(), "map key type bool") {
		t.Fatalf("BoolKeys: %v", err)
	}
}

// TestGRPCGoTypesOddMapEntry (FuzzGoTypes's finding): a map entry that
// repeats its key field with another wire type after a valid key made
// protobuf-go's reflective decoder panic, which grpc-go does not recover
// (the process died). It is valid protobuf (a field of another wire type
// is skipped): the entry decodes, and the gateway serves the next call.
func TestGRPCGoTypesOddMapEntry(t *testing.T) {
	addr := serveEchoes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cc := grpcConn(t, addr)
	in, out := reflectedMethod(t, ctx, addr, "Echoes", "Rich")
	counts := in.Fields().ByName("Counts")
	// Counts (map<string, int64>): one entry, key "k", then field 1 (the
	// key) again as a varint. The bytes go out as the request's unknown
	// fields, as they are.
	entry := []byte("\x0a\x01k\x08\x00")
	raw := protowire.AppendTag(nil, counts.Number(), protowire.BytesType)
	raw = protowire.AppendBytes(raw, entry)
	req := dynamicpb.NewMessage(in)
	req.SetUnknown(raw)
	reply := dynamicpb.NewMessage(out)
	if err := cc.Invoke(ctx, "/Echoes/Rich", req, reply); err != nil {
		t.Fatalf("odd map entry: %v", err)
	}
	key := protoreflect.ValueOfString("k").MapKey()
	if m := reply.Get(out.Fields().ByName("Counts")).Map(); m.Len() != 1 || !m.Has(key) || m.Get(key).Int() != 0 {
		t.Fatalf("odd map entry came back as %v", reply)
	}
	good := dynamicpb.NewMessage(in)
	good.Mutable(counts).Map().Set(key, protoreflect.ValueOfInt64(3))
	reply = dynamicpb.NewMessage(out)
	if err := cc.Invoke(ctx, "/Echoes/Rich", good, reply); err != nil || reply.Get(out.Fields().ByName("Counts")).Map().Get(key).Int() != 3 {
		t.Fatalf("after the odd entry: %v %v", reply, err)
	}
}

// serveEchoes serves Echoes through a gateway until the test ends and
// returns its address.
func serveEchoes(t *testing.T) string {
	t.Helper()
	srv := server.New(server.WithLogger(discard()))
	if err := srv.Register(Echoes{}); err != nil {
		t.Fatal(err)
	}
	return serveGateway(t, gateway.New(srv, gateway.WithLogger(discard())))
}
