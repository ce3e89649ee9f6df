package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/registry/internal/regutil"
)

// ErrNoPolicy is returned by PolicyStore.Get when the service has no
// policy document. It has code NotFound.
var ErrNoPolicy = fleet.NewError(fleet.NotFound, "zookeeper: no policy document for the service")

// PolicyStore keeps each service's traffic policy document (package
// github.com/fleetrpc/fleet/policy) in one persistent znode,
// Config.PolicyRoot + "/" + service, and follows it with ZooKeeper
// watches, read again after each new session (a watch set before a
// session expired is lost). It is a policy.Store without this module
// depending on the policy module. Safe for concurrent use.
type PolicyStore struct {
	d *Discovery // the connection, its lifetime and reconnection signal
}

// NewPolicyStore returns a PolicyStore using cfg (its Servers,
// SessionTimeout, ACL and PolicyRoot). It connects in the background.
func NewPolicyStore(cfg Config) (*PolicyStore, error) {
	d, err := NewDiscovery(cfg)
	if err != nil {
		return nil, err
	}
	return &PolicyStore{d: d}, nil
}

func (s *PolicyStore) node(service string) string { return path.Join(s.d.cfg.PolicyRoot, service) }

// Get returns service's document, or ErrNoPolicy, or an error with code
// Unavailable when ZooKeeper cannot be reached.
func (s *PolicyStore) Get(_ context.Context, service string) ([]byte, error) {
	if err := regutil.ValidateService(service); err != nil {
		return nil, fleet.WrapError(fleet.InvalidArgument, err)
	}
	b, _, err := s.d.conn.Get(s.node(service))
	if errors.Is(err, zk.ErrNoNode) || (err == nil && len(b) == 0) {
		return nil, ErrNoPolicy
	}
	if err != nil {
		return nil, fleet.Errorf(fleet.Unavailable, "zookeeper: policy of %q: %w", service, err)
	}
	return b, nil
}

// Put replaces service's document (nil or empty deletes the znode),
// creating the znode and its parents as needed. Errors have code
// Unavailable or InvalidArgument.
func (s *PolicyStore) Put(_ context.Context, service string, doc []byte) error {
	if err := regutil.ValidateService(service); err != nil {
		return fleet.WrapError(fleet.InvalidArgument, err)
	}
	if err := s.put(s.node(service), doc); err != nil {
		return fleet.Errorf(fleet.Unavailable, "zookeeper: put policy of %q: %w", service, err)
	}
	return nil
}

func (s *PolicyStore) put(p string, doc []byte) error {
	if len(doc) == 0 {
		err := s.d.conn.Delete(p, -1)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		return err
	}
	for range 5 {
		_, err := s.d.conn.Set(p, doc, -1)
		if !errors.Is(err, zk.ErrNoNode) {
			return err
		}
		dir := ""
		for _, part := range strings.Split(strings.Trim(path.Dir(p), "/"), "/") {
			dir += "/" + part
			if _, err := s.d.conn.Create(dir, nil, zk.FlagPersistent, s.d.cfg.ACL); err != nil && !errors.Is(err, zk.ErrNodeExists) {
				return err
			}
		}
		_, err = s.d.conn.Create(p, doc, zk.FlagPersistent, s.d.cfg.ACL)
		if !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
	}
	return fmt.Errorf("znode %s keeps changing", p)
}

// Watch delivers service's document (nil when it has none) now and each
// time it changes, until ctx is done or Close is called; then the channel
// is closed. While ZooKeeper is unreachable nothing is delivered.
func (s *PolicyStore) Watch(ctx context.Context, service string) (<-chan []byte, error) {
	p := s.node(service)
	return s.d.life.WatchDoc(ctx, service, "zookeeper", s.d.log, func(d *regutil.DocWatch) {
		d.Rounds(s.d.reconnected.C, func(ctx context.Context, reconnected <-chan struct{}) error {
			doc, _, ev, err := s.d.conn.GetW(p)
			if errors.Is(err, zk.ErrNoNode) {
				var exists bool
				exists, _, ev, err = s.d.conn.ExistsW(p)
				if err == nil && exists {
					return nil // created in between: read it
				}
				doc = nil
			}
			if err != nil {
				return err
			}
			if len(doc) == 0 {
				doc = nil
			}
			if !d.Deliver(doc) {
				return nil
			}
			select {
			case <-ev:
			case <-reconnected:
			case <-ctx.Done():
			}
			return nil
		})
	})
}

// Close ends every watch and closes the connection.
func (s *PolicyStore) Close() error { return s.d.Close() }
