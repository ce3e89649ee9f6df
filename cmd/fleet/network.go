package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"time"

	_ "github.com/fleetrpc/fleet/transport/kcp" // registers "kcp"
	"github.com/fleetrpc/fleet/transport/quic"
)

// setupNetwork checks the --network flag and prepares its transport: for
// "quic", a fresh self-signed certificate for 127.0.0.1 that the demo's
// servers present and its client trusts. It returns the network name
// ("tcp" for "").
func setupNetwork(name string) (string, error) {
	switch name {
	case "", "tcp":
		return "tcp", nil
	case "kcp":
		return name, nil
	case "quic":
		cfg, err := selfSignedTLS()
		if err != nil {
			return "", err
		}
		quic.Register(quic.Config{TLS: cfg})
		return name, nil
	}
	return "", fmt.Errorf("unknown network %q: want tcp, kcp or quic", name)
}

// selfSignedTLS returns a configuration that serves a new self-signed
// ECDSA P-256 certificate for 127.0.0.1, valid for a day, and trusts it
// as a client.
func selfSignedTLS() (*tls.Config, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "fleet demo"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}},
		RootCAs:      pool,
	}, nil
}
