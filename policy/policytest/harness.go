package policytest

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/server"
)

// Req is the argument of Echo.Do and Echo.Other: Sleep is how long the
// handler waits (bounded by the call's context) before answering; Fail,
// when not OK, is the code it fails with.
type Req struct {
	Sleep time.Duration
	Fail  fleet.Code
}

// Rep is the answer: the name of the node that handled the call.
type Rep struct{ From string }

// Node is one server of service "Echo" on the in-process network.
type Node struct {
	Name    string
	Version string
	Tags    []string
	Calls   atomic.Int64
	// FailAll, when not OK, fails every call with that code.
	FailAll atomic.Uint32
	// Delay, in nanoseconds, is added to every call (bounded by the
	// call's context).
	Delay atomic.Int64

	srv  *server.Server
	addr string
	done chan struct{}
}

// Start starts a node named name carrying version and tags. Stop it with
// Close.
func Start(name, version string, tags ...string) (*Node, error) {
	n := &Node{Name: name, Version: version, Tags: tags, srv: server.New(), done: make(chan struct{})}
	h := func(ctx context.Context, in *Req, out *Rep) error {
		n.Calls.Add(1)
		out.From = n.Name
		if c := fleet.Code(n.FailAll.Load()); c != fleet.OK {
			return fleet.NewError(c, "failing by request")
		}
		if d := in.Sleep + time.Duration(n.Delay.Load()); d > 0 {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				return fleet.FromContextError(ctx.Err())
			}
		}
		if in.Fail != fleet.OK {
			return fleet.NewError(in.Fail, "failing by request")
		}
		return nil
	}
	for _, m := range []string{"Do", "Other"} {
		if err := n.srv.RegisterFunction("Echo", m, h); err != nil {
			return nil, err
		}
	}
	lis, err := n.srv.Listen("inprocess", "")
	if err != nil {
		return nil, err
	}
	n.addr = lis.Addr().String()
	go func() { defer close(n.done); n.srv.Serve(lis) }()
	return n, nil
}

// Instance returns the node's registry entry.
func (n *Node) Instance() registry.Instance {
	return registry.Instance{Service: "Echo", Network: "inprocess", Addr: n.addr, Version: n.Version, Tags: n.Tags}
}

// Close stops the node.
func (n *Node) Close() {
	n.srv.Close()
	<-n.done
}

// Shares counts calls by the node that answered them. Safe for
// concurrent use.
type Shares struct {
	mu sync.Mutex
	by map[string]int
	n  int
}

// Add counts one answer from node.
func (s *Shares) Add(node string) {
	s.mu.Lock()
	if s.by == nil {
		s.by = map[string]int{}
	}
	s.by[node]++
	s.n++
	s.mu.Unlock()
}

// Percent returns the share of the counted answers that came from the
// given nodes, 0 to 100.
func (s *Shares) Percent(nodes ...string) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == 0 {
		return 0
	}
	k := 0
	for _, n := range nodes {
		k += s.by[n]
	}
	return 100 * float64(k) / float64(s.n)
}
