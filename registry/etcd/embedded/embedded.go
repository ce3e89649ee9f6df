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

func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// New starts an etcd with its data in dir (a new temporary directory,
// removed by Close, when dir is ""). It returns once etcd serves.
func New(dir string) (*Server, error) {
	s := &Server{dir: dir}
	if dir == "" {
		d, err := os.MkdirTemp("", "fleet-etcd-")
		if err != nil {
			return nil, err
		}
		s.dir, s.ownDir = d, true
	}
	cp, err := freePort()
	if err != nil {
		return nil, err
	}
	pp, err := freePort()
	if err != nil {
		return nil, err
	}
	s.clientURL = url.URL{Scheme: "http", Host: cp}
	s.peerURL = url.URL{Scheme: "http", Host: pp}
	if err := s.Start(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
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
