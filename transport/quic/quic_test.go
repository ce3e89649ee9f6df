package quic_test

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/internal/testutil"
	"github.com/fleetrpc/fleet/transport/quic"
	"github.com/fleetrpc/fleet/transport/transporttest"
	quicgo "github.com/quic-go/quic-go"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// register registers "quic" with one TLS configuration that serves a
// fresh self-signed certificate for 127.0.0.1 and trusts it as a client,
// and returns that configuration.
func register(t *testing.T) *tls.Config {
	srv, cli := testutil.TLSConfigs(t)
	cfg := &tls.Config{Certificates: srv.Certificates, RootCAs: cli.RootCAs}
	quic.Register(quic.Config{TLS: cfg})
	return cfg
}

func TestConformance(t *testing.T) {
	register(t)
	transporttest.Run(t, "quic", transporttest.Options{})
}

func TestListenNeedsCertificate(t *testing.T) {
	_, err := quic.New(quic.Config{}).Listen(context.Background(), "127.0.0.1:0")
	if fleet.CodeOf(err) != fleet.InvalidArgument {
		t.Fatalf("listen without a certificate: %v, want InvalidArgument", err)
	}
}

// TestUntrustedServer: a client that does not trust the server's
// certificate fails to dial with Unavailable.
func TestUntrustedServer(t *testing.T) {
	register(t)
	s := transporttest.StartServer(t, "quic", transporttest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := quic.New(quic.Config{TLS: &tls.Config{RootCAs: nil, ServerName: "127.0.0.1"}}).Dial(ctx, s.Addr)
	if fleet.CodeOf(err) != fleet.Unavailable {
		t.Fatalf("dial an untrusted server: %v, want Unavailable", err)
	}
}

func TestDialNoServer(t *testing.T) {
	register(t)
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().String()
	pc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := client.Dial(ctx, "quic", addr); fleet.CodeOf(err) != fleet.Unavailable {
		t.Fatalf("dial: %v, want Unavailable", err)
	}
}

// TestStrangers: random datagrams (half shaped like QUIC Initial packets),
// and a QUIC peer that opens a stream but does not say the Fleet hello,
// reach no Fleet connection and do not disturb a client calling at the
// same time.
func TestStrangers(t *testing.T) {
	tlsCfg := register(t)
	transporttest.RunStrangers(t, "quic", transporttest.Options{}, transporttest.Strangers{
		Seed: 3,
		Shape: func(i int, buf []byte) {
			if i%2 == 0 && len(buf) > 8 {
				buf[0] = 0xc0 | buf[0]&0x0f // a long header, as an Initial has
				buf[1], buf[2], buf[3], buf[4] = 0, 0, 0, 1
			}
		},
		Peer: func(t testing.TB, addr string, stop <-chan struct{}) {
			cfg := tlsCfg.Clone()
			cfg.NextProtos = []string{quic.ALPN}
			cfg.ServerName = "127.0.0.1"
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				qc, err := quicgo.DialAddr(ctx, addr, cfg, nil)
				if err == nil {
					if st, err := qc.OpenStreamSync(ctx); err == nil {
						_, _ = st.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
					}
					time.Sleep(20 * time.Millisecond)
					_ = qc.CloseWithError(0, "")
				}
				cancel()
			}
		},
	})
}

// TestLoss: through a relay that drops 5% of datagrams each way and
// delays each by 5 ms, every call over QUIC completes within its deadline.
func TestLoss(t *testing.T) {
	register(t)
	transporttest.RunLoss(t, "quic", transporttest.Options{}, transporttest.RelayConfig{Loss: 0.05, Delay: 5 * time.Millisecond, Seed: 13})
}

// BenchmarkEcho: Fleet over QUIC at 100 callers, direct and through the
// lossy relay (20 ms each way; 0%, 1%, 5% loss).
func BenchmarkEcho(b *testing.B) {
	srv, cli := testutil.TLSConfigs(b)
	quic.Register(quic.Config{TLS: &tls.Config{Certificates: srv.Certificates, RootCAs: cli.RootCAs}})
	transporttest.BenchLinks(b, "quic", transporttest.Options{})
}
