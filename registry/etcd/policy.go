package etcd

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/registry/internal/regutil"
)

// ErrNoPolicy is returned by PolicyStore.Get when the service has no
// policy document. It has code NotFound.
var ErrNoPolicy = fleet.NewError(fleet.NotFound, "etcd: no policy document for the service")

// PolicyStore keeps each service's traffic policy document (package
// github.com/fleetrpc/fleet/policy) under one etcd key,
// Config.PolicyPrefix + "/" + service, and watches it: it is a
// policy.Store (Get, Put, Watch) without this module depending on the
// policy module. The document's bytes are stored as given; the policy
// Watcher checks them. Safe for concurrent use.
type PolicyStore struct {
	d *Discovery // the client, its lifetime and its reconnection signal
}

// NewPolicyStore returns a PolicyStore using cfg (its Endpoints or Client,
// credentials, timeouts and PolicyPrefix). It fails only when the client
// cannot be created; etcd need not be reachable yet.
func NewPolicyStore(cfg Config) (*PolicyStore, error) {
	d, err := NewDiscovery(cfg)
	if err != nil {
		return nil, err
	}
	return &PolicyStore{d: d}, nil
}

func (s *PolicyStore) key(service string) string { return s.d.cfg.PolicyPrefix + "/" + service }

// Get returns service's document, or ErrNoPolicy, or an error with code
// Unavailable when etcd cannot be reached within ctx and RequestTimeout.
func (s *PolicyStore) Get(ctx context.Context, service string) ([]byte, error) {
	if err := regutil.ValidateService(service); err != nil {
		return nil, fleet.WrapError(fleet.InvalidArgument, err)
	}
	rctx, cancel := s.d.cfg.requestContext(ctx)
	defer cancel()
	resp, err := s.d.client.Get(rctx, s.key(service))
	if err != nil {
		return nil, fleet.Errorf(fleet.Unavailable, "etcd: policy of %q: %w", service, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, ErrNoPolicy
	}
	return resp.Kvs[0].Value, nil
}

// Put replaces service's document; nil or empty deletes it. Errors have
// code Unavailable (etcd unreachable) or InvalidArgument (bad service).
func (s *PolicyStore) Put(ctx context.Context, service string, doc []byte) error {
	if err := regutil.ValidateService(service); err != nil {
		return fleet.WrapError(fleet.InvalidArgument, err)
	}
	rctx, cancel := s.d.cfg.requestContext(ctx)
	defer cancel()
	var err error
	if len(doc) == 0 {
		_, err = s.d.client.Delete(rctx, s.key(service))
	} else {
		_, err = s.d.client.Put(rctx, s.key(service), string(doc))
	}
	if err != nil {
		return fleet.Errorf(fleet.Unavailable, "etcd: put policy of %q: %w", service, err)
	}
	return nil
}

// Watch delivers service's document (nil when it has none) now and each
// time it changes, until ctx is done or Close is called; then the channel
// is closed. While etcd is unreachable nothing is delivered; once it is
// back, the document is read again and delivered if it changed.
func (s *PolicyStore) Watch(ctx context.Context, service string) (<-chan []byte, error) {
	key := s.key(service)
	return s.d.life.WatchDoc(ctx, service, "etcd", s.d.log, func(d *regutil.DocWatch) {
		d.Rounds(s.d.reconnected.C, func(ctx context.Context, reconnected <-chan struct{}) error {
			rctx, rcancel := s.d.cfg.requestContext(ctx)
			resp, err := s.d.client.Get(rctx, key)
			rcancel()
			if err != nil {
				return err
			}
			var doc []byte
			if len(resp.Kvs) > 0 {
				doc = resp.Kvs[0].Value
			}
			if !d.Deliver(doc) {
				return nil
			}
			wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
			defer wcancel()
			s.follow(ctx, s.d.client.Watch(wctx, key, clientv3.WithRev(resp.Header.Revision+1)), reconnected, d.Deliver)
			return nil
		})
	})
}

// follow delivers the key's changes until the watch fails, reconnected
// fires or ctx ends: then the key must be read again.
func (s *PolicyStore) follow(ctx context.Context, wch clientv3.WatchChan, reconnected <-chan struct{}, deliver func([]byte) bool) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-reconnected:
			return
		case wr, ok := <-wch:
			if !ok || wr.Err() != nil || wr.Canceled || wr.CompactRevision != 0 {
				return
			}
			for _, ev := range wr.Events {
				var doc []byte
				if ev.Type == clientv3.EventTypePut {
					doc = ev.Kv.Value
				}
				if !deliver(doc) {
					return
				}
			}
		}
	}
}

// Close ends every watch and closes the client unless it came from
// Config.Client.
func (s *PolicyStore) Close() error { return s.d.Close() }
