package gateway

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/internal/benchpb"
	"github.com/fleetrpc/fleet/internal/demo"
	"github.com/fleetrpc/fleet/protocol"
	"github.com/fleetrpc/fleet/server"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// GTAll holds every kind of field the Go-type mapping covers (see
// docs/gateway.md, "Go types over gRPC"); GTEcho serves it for
// FuzzGRPC.
type GTAll struct {
	Name  string `json:"name"`
	Skip  string `json:"-"`
	Small int8
	U8    uint8
	U16   uint16
	I32   int32
	Big   uint64
	F32   float32
	F64   float64
	On    bool
	Raw   []byte
	Tags  []string
	Nums  []int
	Arr   [3]int16
	When  time.Time
	Wait  time.Duration
	Addr  netip.Addr
	Inner GTInner
	Ptr   *GTInner
	List  []GTInner
	PList []*GTInner
	Count map[string]int
	ByID  map[int32]*GTInner
	Opt   *int
	PP    **string
}

// GTInner is GTAll's nested struct.
type GTInner struct{ X, Y float64 }

// GTEcho's methods return their argument; All also sends the request
// metadata back as response metadata.
type GTEcho struct{}

func (GTEcho) All(ctx context.Context, in, out *GTAll) error {
	for k, v := range fleet.IncomingMetadata(ctx) {
		fleet.SetResponseMetadata(ctx, k, v)
	}
	*out = *in
	return nil
}

func (GTEcho) Int8(_ context.Context, in, out *int8) error { *out = *in; return nil }

func (GTEcho) Strs(_ context.Context, in, out *[]string) error { *out = *in; return nil }

func (GTEcho) Map(_ context.Context, in, out *map[string]GTInner) error { *out = *in; return nil }

// Flags has a map key encoding/json cannot encode: not served over gRPC.
func (GTEcho) Flags(_ context.Context, in, out *map[bool]string) error { *out = *in; return nil }

func (GTEcho) When(_ context.Context, in, out *time.Time) error { *out = *in; return nil }

// fuzzMethod is the grpc.ServerTransportStream grpc.MethodFromServerStream
// reads the method path from.
type fuzzMethod string

func (m fuzzMethod) Method() string             { return string(m) }
func (fuzzMethod) SetHeader(metadata.MD) error  { return nil }
func (fuzzMethod) SendHeader(metadata.MD) error { return nil }
func (fuzzMethod) SetTrailer(metadata.MD) error { return nil }

// fuzzStream is the grpc.ServerStream of one unary call handed to
// handleGRPC without a network: RecvMsg yields one request message, then
// io.EOF. Both directions go through passCodec, and message sizes are
// bounded as grpc-go bounds them before the handler sees a message
// (MaxRecvMsgSize) and after it sends one (MaxSendMsgSize), both
// ResourceExhausted.
type fuzzStream struct {
	ctx              context.Context
	in               []byte
	read             bool
	maxRecv, maxSend int
	header           metadata.MD
	out              [][]byte
}

func (s *fuzzStream) SetHeader(md metadata.MD) error {
	s.header = metadata.Join(s.header, md)
	return nil
}
func (s *fuzzStream) SendHeader(md metadata.MD) error { return s.SetHeader(md) }
func (s *fuzzStream) SetTrailer(metadata.MD)          {}
func (s *fuzzStream) Context() context.Context        { return s.ctx }

func (s *fuzzStream) SendMsg(m any) error {
	bs, err := passCodec{}.Marshal(m)
	if err != nil {
		return err
	}
	b := bs.Materialize()
	if len(b) > s.maxSend {
		return status.Errorf(codes.ResourceExhausted, "sent message larger than max (%d vs. %d)", len(b), s.maxSend)
	}
	s.out = append(s.out, b)
	return nil
}

func (s *fuzzStream) RecvMsg(m any) error {
	if s.read {
		return io.EOF
	}
	s.read = true
	if len(s.in) > s.maxRecv {
		return status.Errorf(codes.ResourceExhausted, "received message larger than max (%d vs. %d)", len(s.in), s.maxRecv)
	}
	return passCodec{}.Unmarshal(mem.BufferSlice{mem.SliceBuffer(s.in)}, m)
}

// fuzzGRPCLimit is FuzzGRPC's MaxDecompressedSize: the gRPC receive limit
// and the bound on the JSON the Go-types path hands to Server.Invoke.
const fuzzGRPCLimit = 4 << 10

// newFuzzGateway returns a gateway over Go-typed services (GTEcho,
// demo.Arith) and a protobuf one (demo.Hello), as FuzzGRPC drives it.
func newFuzzGateway(tb testing.TB) *Gateway {
	tb.Helper()
	log := slog.New(slog.DiscardHandler)
	srv := server.New(server.WithLimits(protocol.Limits{MaxDecompressedSize: fuzzGRPCLimit}), server.WithLogger(log))
	for _, s := range []any{GTEcho{}, demo.Arith{}, &demo.Hello{}} {
		if err := srv.Register(s); err != nil {
			tb.Fatal(err)
		}
	}
	tb.Cleanup(func() { srv.Close() })
	return New(srv, WithProtoPackage("fleet.fuzz"), WithLogger(log))
}

// callGRPC runs one unary gRPC call of path with request bytes body and
// the incoming metadata md through handleGRPC, as grpc-go's unknown
// service handler would; it returns the handler's error, the reply
// messages sent and the response header.
func callGRPC(g *Gateway, path string, body []byte, md metadata.MD) (error, [][]byte, metadata.MD) {
	ctx := metadata.NewIncomingContext(context.Background(), md)
	ctx = grpc.NewContextWithServerTransportStream(ctx, fuzzMethod(path))
	l := g.srv.Limits()
	ss := &fuzzStream{ctx: ctx, in: body, maxRecv: l.MaxDecompressedSize, maxSend: l.MaxFrameSize}
	err := g.handleGRPC(nil, ss)
	return err, ss.out, ss.header
}

// reservedGRPCKey reports whether grpcMetadata leaves the gRPC metadata
// key k out of the Fleet metadata.
func reservedGRPCKey(k string) bool {
	switch k {
	case "content-type", "te", "user-agent":
		return true
	}
	return strings.HasPrefix(k, ":") || strings.HasPrefix(k, "grpc-")
}

// FuzzGRPC sends arbitrary unary gRPC calls (method path, request bytes,
// one metadata pair) through the gateway's gRPC handler (handleGRPC, no
// network) for Go-typed methods (GTEcho: every field kind of the Go-type
// mapping; demo.Arith) and a protobuf one (demo.Hello.Say). It asserts:
// no panic; every failure is a gRPC status with code InvalidArgument,
// Unimplemented or ResourceExhausted (Unknown only for Arith.Div's
// divide by zero), never Internal; a request whose Go value's JSON
// exceeds the limit is ResourceExhausted; a request the decode-cost
// pre-scan refuses (checkDecodeCost: ResourceExhausted for an estimated
// cost over the limit, InvalidArgument for bad wire data or nesting) is
// refused with that code, and bad wire data only where protobuf-go
// finds it too; a success sends exactly one
// reply that decodes into the method's reply message and is what the
// method computes (GTEcho's reply equals its request's Go value,
// Arith's sum or product, Hello.Say's echo); the request metadata reaches
// the handler without the gRPC protocol's own keys. The seed corpus is in
// testdata/fuzz/FuzzGRPC.
func FuzzGRPC(f *testing.F) {
	for _, s := range []struct {
		path string
		body []byte
	}{
		{"/GTEcho/All", []byte("\n\x01n\x18\x7f")},
		{"/fleet.fuzz.GTEcho/Int8", []byte("\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01")},
		{"/GTEcho/Strs", []byte("\n\x01a\n\x00")},
		{"/GTEcho/Map", []byte("\n\x0b\n\x01k\x12\x06\t\x00\x00\x00\x00\x00\x00\xf0?")},
		{"/GTEcho/When", []byte("\n\x142026-11-25T17:00:00Z")},
		{"/Arith/Add", []byte("\x08\x02\x10\x03")},
		{"/Arith/Div", []byte("\x08\x02")},
		{"/Hello/Say", mustMarshal(f, benchpb.New())},
		{"/Hello/Say", []byte("\xff")},
		{"/Nope/Nope", nil},
		{"Arith", nil},
	} {
		f.Add(s.path, s.body, "k", "v")
	}
	g := newFuzzGateway(f)
	f.Fuzz(func(t *testing.T, path string, body []byte, mdKey, mdVal string) {
		md := metadata.Pairs("user-agent", "fuzz", "grpc-accept-encoding", "gzip")
		if mdKey != "" {
			md.Append(mdKey, mdVal)
		}
		err, out, header := callGRPC(g, path, body, md)
		checkGRPCCall(t, g, path, body, md, err, out, header)
	})
}

func mustMarshal(tb testing.TB, m proto.Message) []byte {
	tb.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// checkGRPCCall asserts FuzzGRPC's invariants for one call.
func checkGRPCCall(t *testing.T, g *Gateway, path string, body []byte, md metadata.MD, err error, out [][]byte, header metadata.MD) {
	t.Helper()
	svc, method, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	_, d, known := g.fleetName(svc, method)
	var argMsg, replyMsg *goMessage
	// want is the request's Go value as the wire codec decodes it, decErr
	// its verdict (held to the reference by checkWire).
	var want reflect.Value
	var decErr error
	if known && !isProto(d.ArgType) {
		var gerr error
		if argMsg, replyMsg, gerr = goMessages(d); gerr != nil {
			if err == nil || status.Code(err) != codes.Unimplemented {
				t.Fatalf("%s: a method outside the mapping (%v) answered %v", path, gerr, err)
			}
			return
		}
		if len(body) <= fuzzGRPCLimit {
			checkWire(t, argMsg, body, g.maxDecodeCost())
			want, _, decErr = decodeNew(argMsg, body, g.maxDecodeCost())
		}
	}
	if err != nil {
		st, ok := status.FromError(err)
		if !ok {
			t.Fatalf("%s %q: error that is not a gRPC status: %v", path, body, err)
		}
		if len(out) != 0 {
			t.Fatalf("%s %q: %v after sending %d replies", path, body, err, len(out))
		}
		switch st.Code() {
		case codes.InvalidArgument, codes.Unimplemented, codes.ResourceExhausted:
		case codes.Unknown:
			if st.Message() != "divide by zero" {
				t.Fatalf("%s %q: %v", path, body, err)
			}
		default:
			t.Fatalf("%s %q: code %v: %v", path, body, st.Code(), err)
		}
		if st.Code() != codes.Unimplemented && !known {
			t.Fatalf("%s %q: unknown method answered %v", path, body, err)
		}
		if argMsg != nil && len(body) <= fuzzGRPCLimit {
			if decErr != nil && st.Code() != GRPCCode(fleet.CodeOf(decErr)) {
				t.Fatalf("%s %q: the wire codec found %v, the call answered %v", path, body, decErr, err)
			}
			if decErr == nil && st.Code() != codes.Unknown {
				t.Fatalf("%s %q: a request that decodes answered %v", path, body, err)
			}
		}
		return
	}
	if !known {
		t.Fatalf("%s: unknown method succeeded", path)
	}
	if len(out) != 1 {
		t.Fatalf("%s %q: success with %d replies", path, body, len(out))
	}
	if len(body) > fuzzGRPCLimit {
		t.Fatalf("%s %q: %d bytes over the limit of %d accepted", path, body, len(body), fuzzGRPCLimit)
	}
	if argMsg == nil {
		// demo.Hello.Say: the reply echoes the request.
		in, reply := new(benchpb.BenchmarkMessage), new(benchpb.BenchmarkMessage)
		if err := proto.Unmarshal(body, in); err != nil {
			t.Fatalf("%s %q: request the method accepted does not decode: %v", path, body, err)
		}
		if err := proto.Unmarshal(out[0], reply); err != nil {
			t.Fatalf("%s %q: reply does not decode: %v", path, body, err)
		}
		if err := demo.CheckReply(in, reply); err != nil {
			t.Fatalf("%s %q: %v", path, body, err)
		}
		return
	}
	if decErr != nil {
		t.Fatalf("%s %q: accepted, though the wire codec refuses it: %v", path, body, decErr)
	}
	rv, _, err := decodeNew(replyMsg, out[0], 1<<30)
	if err != nil {
		t.Fatalf("%s %q: reply %q does not decode: %v", path, body, out[0], err)
	}
	if ref, err := replyMsg.decode(out[0]); err != nil || !equalGo(reflect.ValueOf(ref), rv) {
		t.Fatalf("%s %q: reply %q: the reference decodes %v, %v", path, body, out[0], ref, err)
	}
	switch d.Method {
	case "Add", "Mul", "Div":
		a := want.Interface().(*demo.Args)
		want := map[string]int{"Add": a.A + a.B, "Mul": a.A * a.B}[d.Method]
		if d.Method == "Div" {
			want = a.A / a.B
		}
		if got := *rv.Interface().(*int); got != want {
			t.Fatalf("%s(%+v) = %d, want %d", path, a, got, want)
		}
	default:
		if !equalGo(rv, want) {
			t.Fatalf("%s %q: echo changed the value:\n got %#v\nwant %#v", path, body, rv.Elem().Interface(), want.Elem().Interface())
		}
	}
	if d.Method == "All" {
		for k, vs := range md {
			if got := header.Get(k); reservedGRPCKey(k) != (len(got) == 0) {
				t.Fatalf("%s: request metadata %s=%q came back as %q", path, k, vs, got)
			}
		}
	}
}
