package gateway

import (
	"context"
	"maps"
	"net/http"
	"strings"
	"testing"

	"github.com/fleetrpc/fleet"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/tap"
)

// TestFleetMetadata checks the conversion of gRPC request headers to Fleet
// metadata, by the tap (grpc-go's transport) and from the incoming context
// (grpc.Server.ServeHTTP): pseudo-headers and the gRPC protocol's own
// headers are left out, keys lower-cased, repeated values joined with ",".
func TestFleetMetadata(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   metadata.MD
		want fleet.Metadata
	}{
		{"none", nil, nil},
		{"protocol only", metadata.MD{
			":authority": {"x"}, ":path": {"/a/b"}, "content-type": {"application/grpc"},
			"te": {"trailers"}, "user-agent": {"grpc-go"}, "grpc-accept-encoding": {"gzip"}, "grpc-timeout": {"1S"},
		}, nil},
		{"user keys", metadata.MD{
			":authority": {"x"}, "content-type": {"application/grpc"},
			"k": {"v1"}, "multi": {"a", "b"}, "empty": {},
		}, fleet.Metadata{"k": "v1", "multi": "a, b"}},
		{"upper case", metadata.MD{"Trace-Id": {"1"}, "GRPC-Status": {"0"}}, fleet.Metadata{"trace-id": "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fleetMetadata(tc.in); !maps.Equal(got, tc.want) {
				t.Fatalf("fleetMetadata: got %v, want %v", got, tc.want)
			}
			ctx, err := grpcTap(context.Background(), &tap.Info{FullMethodName: "/a/b", Header: tc.in})
			if err != nil {
				t.Fatal(err)
			}
			if got := grpcMetadata(ctx); !maps.Equal(got, tc.want) {
				t.Fatalf("through the tap: got %v, want %v", got, tc.want)
			}
			if got := grpcMetadata(metadata.NewIncomingContext(context.Background(), tc.in)); !maps.Equal(got, tc.want) {
				t.Fatalf("from the incoming context: got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestConnectMetadata checks the conversion of Connect request headers
// to Fleet metadata: the protocols' own headers and those browsers add
// are left out, keys lower-cased, repeated values joined with ",".
func TestConnectMetadata(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   http.Header
		want fleet.Metadata
	}{
		{"none", nil, nil},
		{"protocol and browser only", http.Header{
			"Content-Type": {"application/proto"}, "Connect-Protocol-Version": {"1"}, "Connect-Timeout-Ms": {"100"},
			"Grpc-Timeout": {"1S"}, "Sec-Fetch-Site": {"same-origin"}, "Access-Control-Request-Method": {"POST"},
			"If-None-Match": {"x"}, "User-Agent": {"connect-go"}, "Accept-Encoding": {"gzip"},
		}, nil},
		{"user keys", http.Header{
			"Content-Type": {"application/proto"}, "X-Tenant": {"a", "b"}, "Authorization": {"Bearer t"}, "Empty": {},
			"X-" + strings.Repeat("Long", 20): {"v"},
		}, fleet.Metadata{"x-tenant": "a, b", "authorization": "Bearer t", "x-" + strings.Repeat("long", 20): "v"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := connectMetadata(httpHeaderAll(tc.in)); !maps.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}
