package etcd_test

import (
	"testing"

	"github.com/fleetrpc/fleet/registry/etcd/embedded"
	"go.uber.org/zap"
)

// etcdServer is a single-member etcd running in-process on free loopback
// ports with its data in the test's temporary directory; stop and start
// restart it on the same ports and data, like a server process restarting.
type etcdServer struct {
	t testing.TB
	*embedded.Server
}

// startEtcd starts a new etcd that the test's cleanup stops.
func startEtcd(t testing.TB) *etcdServer {
	t.Helper()
	s, err := embedded.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return &etcdServer{t: t, Server: s}
}

func (s *etcdServer) start() {
	s.t.Helper()
	if err := s.Start(); err != nil {
		s.t.Fatal(err)
	}
}

func (s *etcdServer) stop() { s.Stop() }

var zapNop = zap.NewNop()
