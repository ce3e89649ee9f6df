package conformance

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"

	v1 "github.com/fleetrpc/fleet/conformance/internal/conformancev1"
	"github.com/fleetrpc/fleet/gateway"
	"github.com/fleetrpc/fleet/protocol"
	"github.com/fleetrpc/fleet/server"
	"google.golang.org/protobuf/proto"
)

// ServeCompat is the server under test as the conformance runner starts
// it: it reads one size-delimited ServerCompatRequest from in (a 4-byte
// big-endian length, then the message), starts a Fleet server with the
// ConformanceService behind a gateway on 127.0.0.1 (TLS with the
// runner's certificate when asked, client certificates required when
// given, the message receive limit as the server's MaxDecompressedSize;
// cleartext HTTP/2 served by net/http, WithH2CToHTTP, so Connect and
// gRPC-Web work over h2c too), writes the ServerCompatResponse to out the
// same way, and serves until ctx is done (the runner ends the process
// with a signal). It returns the first error.
func ServeCompat(ctx context.Context, in io.Reader, out io.Writer) error {
	var req v1.ServerCompatRequest
	if err := readDelimited(in, &req); err != nil {
		return fmt.Errorf("read ServerCompatRequest: %w", err)
	}
	limits := protocol.Limits{}.WithDefaults()
	if n := req.GetMessageReceiveLimit(); n > 0 {
		limits.MaxDecompressedSize = int(n)
	}
	logger := slog.New(slog.DiscardHandler)
	srv := server.New(server.WithLogger(logger), server.WithLimits(limits))
	if err := Register(srv); err != nil {
		return err
	}
	opts := []gateway.Option{gateway.WithLogger(logger), gateway.WithH2CToHTTP(true)}
	var resp v1.ServerCompatResponse
	if req.GetUseTls() {
		creds := req.GetServerCreds()
		cert, err := tls.X509KeyPair(creds.GetCert(), creds.GetKey())
		if err != nil {
			return fmt.Errorf("server certificate: %w", err)
		}
		cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		if ca := req.GetClientTlsCert(); len(ca) > 0 {
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(ca) {
				return errors.New("client certificate: no PEM certificate")
			}
			cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
		}
		opts = append(opts, gateway.WithTLS(cfg))
		resp.PemCert = creds.GetCert()
	}
	g := gateway.New(srv, opts...)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- g.Serve(lis) }()
	resp.Host = "127.0.0.1"
	resp.Port = uint32(lis.Addr().(*net.TCPAddr).Port)
	if err := writeDelimited(out, &resp); err != nil {
		g.Close()
		<-done
		return err
	}
	select {
	case <-ctx.Done():
	case err := <-done:
		return err
	}
	g.Close()
	<-done
	return nil
}

func readDelimited(r io.Reader, m proto.Message) error {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > 16<<20 {
		return fmt.Errorf("message of %d bytes", size)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		return err
	}
	return proto.Unmarshal(b, m)
}

func writeDelimited(w io.Writer, m proto.Message) error {
	b, err := proto.Marshal(m)
	if err != nil {
		return err
	}
	_, err = w.Write(binary.BigEndian.AppendUint32(nil, uint32(len(b))))
	if err == nil {
		_, err = w.Write(b)
	}
	return err
}
