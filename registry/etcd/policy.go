package etcd

import (
	"bytes"
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/registry"
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
	if err := regutil.ValidateService(service); err != nil {
		return nil, fleet.WrapError(fleet.InvalidArgument, err)
	}
	wctx, cancel := s.d.life.Merge(ctx)
	out := make(chan []byte)
	if err := s.d.life.Go(func() {
		defer cancel()
		defer close(out)
		s.watch(wctx, service, out)
	}); err != nil {
		cancel()
		return nil, fmt.Errorf("etcd: watch policy of %q: %w", service, registry.ErrClosed)
	}
	return out, nil
}

func (s *PolicyStore) watch(ctx context.Context, service string, out chan<- []byte) {
	key := s.key(service)
	var (
		bo   regutil.Backoff
		last []byte
		sent bool
	)
	deliver := func(doc []byte) bool {
		if sent && bytes.Equal(doc, last) {
			return true
		}
		select {
		case out <- doc:
			sent, last = true, doc
			return true
		case <-ctx.Done():
			return false
		}
	}
	for ctx.Err() == nil {
		reconnected := s.d.reconnected.C()
		rctx, rcancel := s.d.cfg.requestContext(ctx)
		resp, err := s.d.client.Get(rctx, key)
		rcancel()
		if err != nil {
			s.d.log.Debug("policy watch: get failed; retrying", "service", service, "err", err)
			select {
			case <-time.After(bo.Next()):
			case <-reconnected:
			case <-ctx.Done():
			}
			continue
		}
		bo.Reset()
		var doc []byte
		if len(resp.Kvs) > 0 {
			doc = resp.Kvs[0].Value
		}
		if !deliver(doc) {
			return
		}
		wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		wch := s.d.client.Watch(wctx, key, clientv3.WithRev(resp.Header.Revision+1))
		ok := s.follow(ctx, wch, reconnected, deliver)
		wcancel()
		if !ok {
			return
		}
	}
}

// follow delivers the key's changes until the watch fails or reconnected
// fires (true: read again) or ctx ends (false).
func (s *PolicyStore) follow(ctx context.Context, wch clientv3.WatchChan, reconnected <-chan struct{}, deliver func([]byte) bool) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case <-reconnected:
			return true
		case wr, ok := <-wch:
			if !ok || wr.Err() != nil || wr.Canceled || wr.CompactRevision != 0 {
				return ctx.Err() == nil
			}
			for _, ev := range wr.Events {
				var doc []byte
				if ev.Type == clientv3.EventTypePut {
					doc = ev.Kv.Value
				}
				if !deliver(doc) {
					return false
				}
			}
		}
	}
}

// Close ends every watch and closes the client unless it came from
// Config.Client.
func (s *PolicyStore) Close() error { return s.d.Close() }
