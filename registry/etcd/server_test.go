package etcd_test

import (
	"net"
	"net/url"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// etcdServer is a single-member etcd running in-process on free loopback
// ports with its data in a temporary directory; stop and start restart it
// on the same ports and data, like a server process restarting.
type etcdServer struct {
	t         testing.TB
	dir       string
	clientURL url.URL
	peerURL   url.URL
	e         *embed.Etcd
}

func freePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startEtcd starts a new etcd that the test's cleanup stops.
func startEtcd(t testing.TB) *etcdServer {
	t.Helper()
	s := &etcdServer{
		t:         t,
		dir:       t.TempDir(),
		clientURL: url.URL{Scheme: "http", Host: freePort(t)},
		peerURL:   url.URL{Scheme: "http", Host: freePort(t)},
	}
	s.start()
	t.Cleanup(s.stop)
	return s
}

// Endpoint is the client URL.
func (s *etcdServer) Endpoint() string { return s.clientURL.String() }

func (s *etcdServer) start() {
	s.t.Helper()
	cfg := embed.NewConfig()
	cfg.Name = "fleet-test"
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
	// The ports were free a moment ago; retry briefly in case the
	// previous incarnation's sockets are still being released.
	for i := 0; ; i++ {
		e, err = embed.StartEtcd(cfg)
		if err == nil || i == 20 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		s.t.Fatalf("start etcd: %v", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		s.t.Fatalf("etcd failed: %v", err)
	case <-time.After(15 * time.Second):
		e.Close()
		s.t.Fatal("etcd not ready within 15s")
	}
	s.e = e
}

func (s *etcdServer) stop() {
	if s.e != nil {
		s.e.Close()
		s.e = nil
	}
}

var zapNop = zap.NewNop()
