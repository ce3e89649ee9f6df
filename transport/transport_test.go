package transport_test

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/server"
	"github.com/fleetrpc/fleet/transport"
	"github.com/fleetrpc/fleet/transport/transporttest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// tcp2 is a real transport registered under its own name: TCP through
// the net package, reached only through package transport.
type tcp2 struct{}

func (tcp2) Listen(ctx context.Context, addr string) (net.Listener, error) {
	var lc net.ListenConfig
	return lc.Listen(ctx, "tcp", addr)
}

func (tcp2) Dial(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

func init() { transport.Register("tcp2", tcp2{}) }

func TestConformanceCustomTransport(t *testing.T) {
	transporttest.Run(t, "tcp2", transporttest.Options{})
}

func TestConformanceTCP(t *testing.T) {
	transporttest.Run(t, "tcp", transporttest.Options{})
}

func TestUnknownNetwork(t *testing.T) {
	srv := server.New()
	defer srv.Close()
	if _, err := srv.Listen("carrier-pigeon", "127.0.0.1:0"); fleet.CodeOf(err) != fleet.InvalidArgument {
		t.Fatalf("server Listen: %v, want code InvalidArgument", err)
	}
	if err := srv.ListenAndServe("carrier-pigeon", "127.0.0.1:0"); fleet.CodeOf(err) != fleet.InvalidArgument {
		t.Fatalf("server ListenAndServe: %v, want code InvalidArgument", err)
	}
	_, err := client.Dial(context.Background(), "carrier-pigeon", "127.0.0.1:1")
	if fleet.CodeOf(err) != fleet.InvalidArgument {
		t.Fatalf("client Dial: %v, want code InvalidArgument", err)
	}
	t.Logf("error: %v", err)
}

func TestDialFailureIsUnavailable(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close() // nothing listens there now
	_, err = client.Dial(context.Background(), "tcp2", addr)
	if fleet.CodeOf(err) != fleet.Unavailable {
		t.Fatalf("dial to a closed port: %v, want Unavailable", err)
	}
}

func TestSplitAddr(t *testing.T) {
	for _, tc := range []struct{ in, network, addr string }{
		{"kcp@127.0.0.1:8972", "kcp", "127.0.0.1:8972"},
		{"quic@[::1]:443", "quic", "[::1]:443"},
		{"127.0.0.1:8972", "", "127.0.0.1:8972"},
		{"@abstract-socket", "", "@abstract-socket"},
		{"/tmp/a@b.sock", "", "/tmp/a@b.sock"},
		{"Bad@host:1", "", "Bad@host:1"},
	} {
		n, a := transport.SplitAddr(tc.in)
		if n != tc.network || a != tc.addr {
			t.Errorf("SplitAddr(%q) = %q, %q; want %q, %q", tc.in, n, a, tc.network, tc.addr)
		}
	}
}

func TestRegister(t *testing.T) {
	if !slices.Contains(transport.Networks(), "tcp2") {
		t.Fatalf("Networks() = %v, want tcp2 in it", transport.Networks())
	}
	for _, tc := range []struct {
		name string
		tr   transport.Transport
	}{
		{"tcp", tcp2{}}, // built in
		{"", tcp2{}},    // empty
		{"a b", tcp2{}}, // not a name
		{"Kcp", tcp2{}}, // upper case
		{"tcp3", nil},   // nil transport
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q, %v) did not panic", tc.name, tc.tr)
				}
			}()
			transport.Register(tc.name, tc.tr)
		}()
	}
	if _, ok := transport.Lookup("tcp3"); ok {
		t.Fatal("a failed Register left an entry")
	}
}

// BenchmarkEcho: Fleet over TCP at 100 callers, direct and through a
// relay adding 20 ms each way, beside the KCP and QUIC benchmarks of
// their modules.
func BenchmarkEcho(b *testing.B) {
	b.Run("tcp/direct", func(b *testing.B) {
		s := transporttest.StartServer(b, "tcp", transporttest.Options{})
		transporttest.BenchEcho(b, "tcp", s.Addr, 100, transporttest.Options{})
	})
	b.Run("tcp/delay20ms", func(b *testing.B) {
		s := transporttest.StartServer(b, "tcp", transporttest.Options{})
		r := transporttest.NewTCPRelay(b, s.Addr, 20*time.Millisecond)
		transporttest.BenchEcho(b, "tcp", r.Addr(), 100, transporttest.Options{})
	})
}
