package testutil

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/fleetrpc/fleet/server"
)

// Serve starts srv on a loopback TCP port and returns its address; the
// server is closed when the test ends.
func Serve(t testing.TB, srv *server.Server) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	})
	return lis.Addr().String()
}

// TLSConfigs returns a server and a client configuration sharing a fresh
// self-signed certificate for 127.0.0.1 and localhost.
func TLSConfigs(t testing.TB) (srv, cli *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "fleet-test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:              []string{"localhost"},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	srv = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	cli = &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
	return srv, cli
}

// MeasureFleetAllocs runs call 200 times to warm pools and size hints, then
// b.N times, and reports the mean allocations per call beyond apart (what
// the codec and handler allocate, measured apart by the caller) as
// "fleet-allocs/op", with apart itself under apartName.
func MeasureFleetAllocs(b *testing.B, call func(*testing.B), apart float64, apartName string) {
	for range 200 {
		call(b)
	}
	var m0, m1 runtime.MemStats
	b.ReportAllocs()
	b.ResetTimer()
	runtime.ReadMemStats(&m0)
	for i := 0; i < b.N; i++ {
		call(b)
	}
	runtime.ReadMemStats(&m1)
	b.StopTimer()
	total := float64(m1.Mallocs-m0.Mallocs) / float64(b.N)
	b.ReportMetric(apart, apartName)
	b.ReportMetric(total-apart, "fleet-allocs/op")
}
