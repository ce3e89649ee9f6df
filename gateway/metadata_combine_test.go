package gateway_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect/v2"
	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/gateway"
	"github.com/fleetrpc/fleet/internal/benchpb"
	"github.com/fleetrpc/fleet/server"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Raw bytes of a binary header, commas and all, sent twice.
var (
	bin1 = "\x00\xff,\x01"
	bin2 = ", \n"
)

// startMulti serves a gateway for a server whose Multi.Say (unary,
// protobuf), Multi.Join (unary, Go types) and Multi.Watch (server
// stream) report the request metadata "x-multi" and "x-multi-bin" as
// response metadata "seen" and "seen-bin", and answer with headers and
// trailers of two values each, added with fleet.AddResponseMetadata and
// fleet.AddResponseTrailer (Watch: its ResponseTrailer's Add, and
// fleet.AddResponseTrailer for "ctx-trailer").
func startMulti(t *testing.T, opts ...gateway.Option) string {
	t.Helper()
	srv := server.New(server.WithLogger(discard()))
	echo := func(ctx context.Context) {
		md := fleet.IncomingMetadata(ctx)
		fleet.AddResponseMetadata(ctx, "seen", md["x-multi"])
		if v, ok := md["x-multi-bin"]; ok {
			fleet.AddResponseMetadata(ctx, "seen-bin", v)
		}
		fleet.AddResponseMetadata(ctx, "multi", "a")
		fleet.AddResponseMetadata(ctx, "multi", "b")
		fleet.AddResponseMetadata(ctx, "blob-bin", base64.RawStdEncoding.EncodeToString([]byte(bin1)))
		fleet.AddResponseMetadata(ctx, "blob-bin", base64.StdEncoding.EncodeToString([]byte(bin2)))
		fleet.AddResponseTrailer(ctx, "ctx-trailer", "e")
		fleet.AddResponseTrailer(ctx, "ctx-trailer", "f")
	}
	err := server.Handle(srv, "Multi", "Say", func(ctx context.Context, in, out *benchpb.BenchmarkMessage) error {
		echo(ctx)
		fleet.AddResponseTrailer(ctx, "multi-trailer", "c")
		fleet.AddResponseTrailer(ctx, "multi-trailer", "d")
		benchpb.Echo(out, in)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = server.Handle(srv, "Multi", "Join", func(ctx context.Context, in *Pair, out *string) error {
		echo(ctx)
		fleet.AddResponseTrailer(ctx, "multi-trailer", "c")
		fleet.AddResponseTrailer(ctx, "multi-trailer", "d")
		*out = in.A + in.B
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = server.HandleServerStream(srv, "Multi", "Watch", func(ctx context.Context, in *benchpb.BenchmarkMessage, st *server.ServerStream[benchpb.BenchmarkMessage]) error {
		echo(ctx)
		st.ResponseTrailer().Add("multi-trailer", "c")
		st.ResponseTrailer().Add("multi-trailer", "d")
		out := new(benchpb.BenchmarkMessage)
		benchpb.Echo(out, in)
		return st.Send(out)
	})
	if err != nil {
		t.Fatal(err)
	}
	return serveGateway(t, gateway.New(srv, append([]gateway.Option{gateway.WithLogger(discard())}, opts...)...))
}

func TestMetadataAdd(t *testing.T) {
	md := fleet.Metadata{}
	md.Add("k", "a")
	md.Add("k", "b")
	md.Add("k-Bin", "AA")
	md.Add("k-Bin", "AQ")
	if md["k"] != "a, b" || md["k-Bin"] != "AA,AQ" {
		t.Fatalf("Add: %q", md)
	}
	if !fleet.IsBinaryKey("x-BIN") || fleet.IsBinaryKey("bin") || fleet.IsBinaryKey("x-bins") {
		t.Fatal("IsBinaryKey")
	}
	if fleet.AddResponseMetadata(context.Background(), "k", "v") || fleet.AddResponseTrailer(context.Background(), "k", "v") {
		t.Fatal("Add outside a handler reported true")
	}
}

// TestMetadataCombineGRPC: grpc-go sends "x-multi" twice and a binary key
// twice; the handler sees "v1, v2" and the base64 values joined with ",";
// the client gets each combined response value as one header line, and
// the binary values decoded, one each.
func TestMetadataCombineGRPC(t *testing.T) {
	cc := grpcConn(t, startMulti(t))
	ctx := metadata.AppendToOutgoingContext(context.Background(),
		"x-multi", "v1", "x-multi", "v2", "x-multi-bin", bin1, "x-multi-bin", bin2)
	check := func(t *testing.T, hdr, tr metadata.MD) {
		t.Helper()
		for _, c := range []struct {
			md   metadata.MD
			key  string
			want []string
		}{
			{hdr, "seen", []string{"v1, v2"}},
			{hdr, "seen-bin", []string{bin1, bin2}},
			{hdr, "multi", []string{"a, b"}},
			{hdr, "blob-bin", []string{bin1, bin2}},
			{tr, "multi-trailer", []string{"c, d"}},
			{tr, "ctx-trailer", []string{"e, f"}},
		} {
			if got := c.md.Get(c.key); !slices.Equal(got, c.want) {
				t.Errorf("%s = %q, want %q", c.key, got, c.want)
			}
		}
	}
	t.Run("unary", func(t *testing.T) {
		var hdr, tr metadata.MD
		if err := cc.Invoke(ctx, "/Multi/Say", benchpb.New(), new(benchpb.BenchmarkMessage), grpc.Header(&hdr), grpc.Trailer(&tr)); err != nil {
			t.Fatal(err)
		}
		check(t, hdr, tr)
	})
	t.Run("server stream", func(t *testing.T) {
		st, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, "/Multi/Watch")
		if err != nil {
			t.Fatal(err)
		}
		if err := st.SendMsg(benchpb.New()); err != nil {
			t.Fatal(err)
		}
		if err := st.CloseSend(); err != nil {
			t.Fatal(err)
		}
		out := new(benchpb.BenchmarkMessage)
		if err := st.RecvMsg(out); err != nil {
			t.Fatal(err)
		}
		if err := st.RecvMsg(out); err != io.EOF {
			t.Fatalf("end: %v", err)
		}
		hdr, err := st.Header()
		if err != nil {
			t.Fatal(err)
		}
		check(t, hdr, st.Trailer())
	})
}

// TestGRPCCardinality: a unary or server-stream call with no request
// message or two is Unimplemented (gRPC's status code table), checked by
// the gateway since grpc-go hands every call to it as a bidi stream.
func TestGRPCCardinality(t *testing.T) {
	cc := grpcConn(t, startMulti(t))
	for _, path := range []string{"/Multi/Say", "/Multi/Join", "/Multi/Watch"} {
		for _, n := range []int{0, 2} {
			st, err := cc.NewStream(context.Background(), &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, path)
			if err != nil {
				t.Fatal(err)
			}
			for range n {
				if err := st.SendMsg(benchpb.New()); err != nil {
					t.Fatal(err)
				}
			}
			if err := st.CloseSend(); err != nil {
				t.Fatal(err)
			}
			err = st.RecvMsg(new(benchpb.BenchmarkMessage))
			if s, _ := status.FromError(err); s.Code() != codes.Unimplemented || !strings.Contains(s.Message(), "cardinality violation") {
				t.Errorf("%s with %d requests: %v", path, n, err)
			}
		}
		// One message is fine.
		st, err := cc.NewStream(context.Background(), &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, path)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.SendMsg(benchpb.New()); err != nil {
			t.Fatal(err)
		}
		if err := st.CloseSend(); err != nil {
			t.Fatal(err)
		}
		if path == "/Multi/Join" {
			// Go types over gRPC: Pair's fields 1 and 2.
			continue
		}
		if err := st.RecvMsg(new(benchpb.BenchmarkMessage)); err != nil {
			t.Errorf("%s with 1 request: %v", path, err)
		}
	}
}

// TestMetadataCombineConnect: connect-go sends "X-Multi" on two header
// lines (Connect and gRPC-Web, unary and a server stream, HTTP/1.1 and
// h2c); the handler sees "v1, v2"; the combined response values come back
// as one line each.
func TestMetadataCombineConnect(t *testing.T) {
	addr := startMulti(t, gateway.WithH2CToHTTP(true))
	b1, b2 := connect.EncodeBinaryHeader([]byte(bin1)), connect.EncodeBinaryHeader([]byte(bin2))
	clients := connectClients(httpClient(t), addr)
	for name, c := range connectClients(h2cClient(t), addr) {
		clients[name+"/h2c"] = c
	}
	for name, c := range clients {
		t.Run(name, func(t *testing.T) {
			check := func(t *testing.T, hdr, tr *connect.Header) {
				t.Helper()
				for _, c := range []struct {
					h    *connect.Header
					key  string
					want []string
				}{
					{hdr, "Seen", []string{"v1, v2"}},
					{hdr, "Seen-Bin", []string{b1 + "," + b2}},
					{hdr, "Multi", []string{"a, b"}},
					{tr, "Multi-Trailer", []string{"c, d"}},
					{tr, "Ctx-Trailer", []string{"e, f"}},
				} {
					if got := c.h.Values(c.key); !slices.Equal(got, c.want) {
						t.Errorf("%s = %q, want %q", c.key, got, c.want)
					}
				}
				var got []string
				for part := range strings.SplitSeq(hdr.Get("Blob-Bin"), ",") {
					b, err := connect.DecodeBinaryHeader(part)
					if err != nil {
						t.Fatalf("Blob-Bin %q: %v", hdr.Get("Blob-Bin"), err)
					}
					got = append(got, string(b))
				}
				if !slices.Equal(got, []string{bin1, bin2}) {
					t.Errorf("Blob-Bin = %q", got)
				}
			}
			t.Run("unary", func(t *testing.T) {
				ctx, info := connect.NewClientContext(context.Background())
				info.RequestHeader().Add("X-Multi", "v1")
				info.RequestHeader().Add("X-Multi", "v2")
				info.RequestHeader().Add("X-Multi-Bin", b1)
				info.RequestHeader().Add("X-Multi-Bin", b2)
				if err := c.CallUnary(ctx, unarySpec("/Multi/Say"), benchpb.New(), new(benchpb.BenchmarkMessage)); err != nil {
					t.Fatal(err)
				}
				check(t, info.ResponseHeader(), info.ResponseTrailer())
			})
			t.Run("server stream", func(t *testing.T) {
				ctx, info := connect.NewClientContext(context.Background())
				info.RequestHeader().Add("X-Multi", "v1")
				info.RequestHeader().Add("X-Multi", "v2")
				info.RequestHeader().Add("X-Multi-Bin", b1)
				info.RequestHeader().Add("X-Multi-Bin", b2)
				st, err := c.CallServerStream(ctx, connect.Spec{Procedure: "/Multi/Watch", StreamType: connect.StreamTypeServer}, benchpb.New())
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				for {
					if err := st.Receive(new(benchpb.BenchmarkMessage)); err != nil {
						if !errors.Is(err, io.EOF) {
							t.Fatal(err)
						}
						break
					}
					n++
				}
				if n != 1 {
					t.Fatalf("%d messages", n)
				}
				check(t, info.ResponseHeader(), info.ResponseTrailer())
			})
		})
	}
}

// TestMetadataCombineHTTP: net/http sends "Fleet-Meta-X-Multi" twice to
// HTTP/JSON and to JSON-RPC; the handler sees "v1, v2"; the combined
// response values (and the trailer, a header there) are one line each.
func TestMetadataCombineHTTP(t *testing.T) {
	addr := startMulti(t)
	hc := httpClient(t)
	for _, c := range []struct{ name, path, body string }{
		{"http-json", "/Multi/Join", `{"A":"a","B":"b"}`},
		{"json-rpc", "/jsonrpc", `{"jsonrpc":"2.0","method":"Multi.Join","params":{"A":"a","B":"b"},"id":1}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, "http://"+addr+c.path, strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Add(gateway.MetadataHeaderPrefix+"X-Multi", "v1")
			req.Header.Add(gateway.MetadataHeaderPrefix+"X-Multi", "v2")
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body any
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d, body %v, %v", resp.StatusCode, body, err)
			}
			for key, want := range map[string]string{"Seen": "v1, v2", "Multi": "a, b", "Multi-Trailer": "c, d", "Ctx-Trailer": "e, f"} {
				if got := resp.Header.Values(gateway.MetadataHeaderPrefix + key); !slices.Equal(got, []string{want}) {
					t.Errorf("%s = %q, want %q", key, got, want)
				}
			}
		})
	}
}
