package server

import (
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fleetrpc/fleet/protocol"
)

// syscallEMFILE: out of file descriptors; Accept is retried after a pause.
var syscallEMFILE = syscall.EMFILE

// admitState counts the open connections, in total and per remote IP, for
// the connection limits (WithMaxConns, WithMaxConnsPerIP).
type admitState struct {
	mu        sync.Mutex
	open      int
	perIP     map[string]int
	refused   atomic.Uint64 // by WithMaxConns
	refusedIP atomic.Uint64 // by WithMaxConnsPerIP
}

// admit counts nc in, or refuses it when a connection limit is reached:
// it then writes a go-away (bounded by a second) and closes nc. It returns
// the key to pass to leave, and whether nc was admitted.
func (s *Server) admit(nc net.Conn) (string, bool) {
	maxTotal, maxIP := s.opts.maxConns, s.opts.maxConnsPerIP
	if maxTotal <= 0 && maxIP <= 0 {
		return "", true
	}
	ip := remoteIP(nc.RemoteAddr())
	a := &s.admitted
	a.mu.Lock()
	overTotal := maxTotal > 0 && a.open >= maxTotal
	ok := !overTotal && (maxIP <= 0 || a.perIP[ip] < maxIP)
	if ok {
		a.open++
		if maxIP > 0 {
			if a.perIP == nil {
				a.perIP = map[string]int{}
			}
			a.perIP[ip]++
		}
	}
	a.mu.Unlock()
	if !ok {
		if overTotal {
			a.refused.Add(1)
		} else {
			a.refusedIP.Add(1)
		}
		var b [protocol.HeaderSize + 3]byte
		out, _ := protocol.AppendFrame(b[:0], &protocol.Header{Type: protocol.TypeGoAway}, "", "", nil, nil, 0)
		_ = nc.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = nc.Write(out)
		nc.Close()
		s.opts.logger.Debug("fleet server: connection refused by the connection limits", "remote", nc.RemoteAddr())
	}
	return ip, ok
}

// leave counts out a connection admit let in.
func (s *Server) leave(ip string) {
	if s.opts.maxConns <= 0 && s.opts.maxConnsPerIP <= 0 {
		return
	}
	a := &s.admitted
	a.mu.Lock()
	a.open--
	if s.opts.maxConnsPerIP > 0 {
		if a.perIP[ip]--; a.perIP[ip] <= 0 {
			delete(a.perIP, ip)
		}
	}
	a.mu.Unlock()
}

// RefusedConns returns how many connections the connection limits
// (WithMaxConns, WithMaxConnsPerIP) refused since the server was made: the
// sum of the Refused counts of StageConns and StageConnsPerIP in
// AdmissionStats. Safe for concurrent use.
func (s *Server) RefusedConns() uint64 {
	return s.admitted.refused.Load() + s.admitted.refusedIP.Load()
}

// remoteIP returns addr's IP, or its whole string when it has none (Unix
// sockets: all their peers then share one count).
func remoteIP(addr net.Addr) string {
	switch a := addr.(type) {
	case *net.TCPAddr:
		return a.IP.String()
	case *net.UDPAddr:
		return a.IP.String()
	case nil:
		return ""
	}
	if host, _, err := net.SplitHostPort(addr.String()); err == nil {
		return host
	}
	return addr.String()
}
