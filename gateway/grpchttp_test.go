package gateway_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net/http"
	"testing"

	"github.com/fleetrpc/fleet/gateway"
	"github.com/fleetrpc/fleet/internal/benchpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// TestGRPCOverHTTPTrailersOnly: gRPC through net/http (h2c with
// WithH2CToHTTP) answers a call that fails before any message in
// trailers-only form (grpc-status and the trailer metadata in the
// headers, no HTTP trailers), as grpc-go's own transport does, and a
// call with a message with headers, the message, then trailers; a
// grpc-go client reads both.
func TestGRPCOverHTTPTrailersOnly(t *testing.T) {
	addr := startMulti(t, gateway.WithH2CToHTTP(true))
	hc := h2cClient(t)
	frame := func(m proto.Message) []byte {
		b, err := proto.MarshalOptions{AllowPartial: true}.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return append(binary.BigEndian.AppendUint32([]byte{0}, uint32(len(b))), b...)
	}
	for _, c := range []struct {
		name    string
		body    []byte
		status  string // in the headers when trailersOnly, else in the trailers
		only    bool
		hasBody bool
	}{
		{"no request", nil, "12", true, false},
		{"undecodable request", frame(&benchpb.BenchmarkMessage{}), "3", true, false},
		{"ok", frame(benchpb.New()), "0", false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/Multi/Say", bytes.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/grpc")
			req.Header.Set("Te", "trailers")
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if c.only {
				if resp.Header.Get("Grpc-Status") != c.status || len(resp.Trailer) != 0 || len(b) != 0 {
					t.Fatalf("headers %v, trailers %v, %d body bytes: want trailers-only with grpc-status %s", resp.Header, resp.Trailer, len(b), c.status)
				}
				return
			}
			if resp.Header.Get("Grpc-Status") != "" || resp.Trailer.Get("Grpc-Status") != c.status || len(b) == 0 {
				t.Fatalf("headers %v, trailers %v, %d body bytes", resp.Header, resp.Trailer, len(b))
			}
			if resp.Header.Get("Multi") != "a, b" || resp.Trailer.Get("Multi-Trailer") != "c, d" {
				t.Fatalf("metadata: headers %v, trailers %v", resp.Header, resp.Trailer)
			}
		})
	}
	// grpc-go's client reads the trailers-only answer's code.
	cc := grpcConn(t, addr)
	empty, reply := []byte{}, []byte(nil) // an empty message: required fields missing
	err := cc.Invoke(context.Background(), "/Multi/Say", &empty, &reply, grpc.ForceCodec(rawGRPC{}))
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("an undecodable request: %v", err)
	}
}
