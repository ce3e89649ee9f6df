// Command authtls serves over TLS with a token check, and calls it with the
// right token, a wrong one, and through an XClient. The certificate is made
// on the fly; a real server loads its own (tls.LoadX509KeyPair).
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"log"
	"math/big"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/registry/static"
	"github.com/fleetrpc/fleet/server"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cert, roots := selfSigned("localhost")

	srv := server.New(
		server.WithTLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}),
		server.WithAuth(func(ctx context.Context, info *fleet.CallInfo, token string) error {
			if subtle.ConstantTimeCompare([]byte(token), []byte("Bearer s3cret")) != 1 {
				return fleet.NewError(fleet.Unauthenticated, "bad token")
			}
			return nil
		}),
	)
	err := server.Handle(srv, "Greeter", "Hello", func(ctx context.Context, name *string, reply *string) error {
		*reply = "hello, " + *name
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	lis, err := srv.Listen("tls", "127.0.0.1:0") // TCP with WithTLS's config
	if err != nil {
		log.Fatal(err)
	}
	go srv.Serve(lis)
	defer srv.Shutdown(context.Background())
	addr := lis.Addr().String()
	clientTLS := &tls.Config{RootCAs: roots, ServerName: "localhost"}

	// One connection: TLS and a token on every call.
	c, err := client.Dial(ctx, "tls", addr, client.WithTLS(clientTLS), client.WithAuthToken("Bearer s3cret"))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	var reply string
	name := "Ada"
	if err := c.Call(ctx, "Greeter", "Hello", &name, &reply); err != nil {
		log.Fatal(err)
	}
	fmt.Println("with the token:", reply)

	bad, err := client.Dial(ctx, "tls", addr, client.WithTLS(clientTLS), client.WithAuthToken("Bearer guess"))
	if err != nil {
		log.Fatal(err)
	}
	defer bad.Close()
	err = bad.Call(ctx, "Greeter", "Hello", &name, &reply)
	fmt.Println("with a wrong token:", fleet.CodeOf(err))

	// An XClient passes the same options to each connection it makes; the
	// registry record says the instance speaks TLS.
	disc, err := static.NewDiscovery(static.Config{Instances: []registry.Instance{
		{Service: "Greeter", Addr: addr, Network: "tls"},
	}})
	if err != nil {
		log.Fatal(err)
	}
	x, err := client.NewXClient("Greeter", disc,
		client.WithClientOptions(client.WithTLS(clientTLS), client.WithAuthToken("Bearer s3cret")))
	if err != nil {
		log.Fatal(err)
	}
	defer x.Close()
	name = "Grace"
	if err := x.Call(ctx, "Hello", &name, &reply); err != nil {
		log.Fatal(err)
	}
	fmt.Println("through an XClient:", reply)
}

// selfSigned returns a certificate for host and a pool that trusts it.
func selfSigned(host string) (tls.Certificate, *x509.CertPool) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		log.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: host},
		DNSNames:              []string{host},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		log.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		log.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}
