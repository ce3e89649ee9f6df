package embedded

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Server is an in-process etcd. Not safe for concurrent Start/Stop.
type Server struct {
	dir       string
	ownDir    bool
	clientURL url.URL
	peerURL   url.URL
	e         *embed.Etcd
}

// freePort returns host:port with a port free a moment ago.
func freePort(host string) (string, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// New starts an etcd with its data in dir (a new temporary directory,
// removed by Close, when dir is ""). It returns once etcd serves.
func New(dir string) (*Server, error) {
	return NewAt(dir, "")
}

// NewAt is New with the client address clientAddr ("127.0.0.1:2379"); an
// empty clientAddr or port 0 picks a free loopback port, as New does. The
// peer port is always picked free. It fails when clientAddr is in use
// (after retrying for about 2 s).
func NewAt(dir, clientAddr string) (*Server, error) {
	cp, err := clientPort(clientAddr)
	if err != nil {
		return nil, err
	}
	pp, err := freePort("127.0.0.1")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir}
	if dir == "" {
		d, err := os.MkdirTemp("", "fleet-etcd-")
		if err != nil {
			return nil, err
		}
		s.dir, s.ownDir = d, true
	}
	s.clientURL = url.URL{Scheme: "http", Host: cp}
	s.peerURL = url.URL{Scheme: "http", Host: pp}
	if err := s.Start(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// clientPort resolves NewAt's clientAddr: "" is a free loopback port,
// host:0 a free port on host, anything else itself.
func clientPort(clientAddr string) (string, error) {
	if clientAddr == "" {
		return freePort("127.0.0.1")
	}
	host, port, err := net.SplitHostPort(clientAddr)
	if err != nil {
		return "", fmt.Errorf("etcdserver: client address %q: %w", clientAddr, err)
	}
	if port == "0" {
		return freePort(host)
	}
	return clientAddr, nil
}

// Endpoint is the client URL, such as "http://127.0.0.1:40123".
func (s *Server) Endpoint() string { return s.clientURL.String() }

// Addr is the client address, "127.0.0.1:port".
func (s *Server) Addr() string { return s.clientURL.Host }

// Start starts a stopped server on its ports and data.
func (s *Server) Start() error {
	if s.e != nil {
		return nil
	}
	cfg := embed.NewConfig()
	cfg.Name = "fleet"
	cfg.Dir = s.dir
	cfg.ListenClientUrls = []url.URL{s.clientURL}
	cfg.AdvertiseClientUrls = []url.URL{s.clientURL}
	cfg.ListenPeerUrls = []url.URL{s.peerURL}
	cfg.AdvertisePeerUrls = []url.URL{s.peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.TickMs = 50
	cfg.ElectionMs = 500
	cfg.UnsafeNoFsync = true
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	var (
		e   *embed.Etcd
		err error
	)
	// The ports were free a moment ago; retry briefly while a previous
	// incarnation's sockets are released.
	for i := 0; ; i++ {
		e, err = embed.StartEtcd(cfg)
		if err == nil || i == 20 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("etcdserver: start: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return fmt.Errorf("etcdserver: %w", err)
	case <-time.After(15 * time.Second):
		e.Close()
		return fmt.Errorf("etcdserver: not ready within 15s")
	}
	s.e = e
	return nil
}

// Stop stops the server, keeping its data and ports for Start.
func (s *Server) Stop() {
	if s.e != nil {
		s.e.Close()
		s.e = nil
	}
}

// Close stops the server and removes a temporary data directory.
func (s *Server) Close() {
	s.Stop()
	if s.ownDir {
		os.RemoveAll(s.dir)
	}
}
