package redis

import (
	"context"
	"errors"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/registry/internal/regutil"
)

// ErrNoPolicy is returned by PolicyStore.Get when the service has no
// policy document. It has code NotFound.
var ErrNoPolicy = fleet.NewError(fleet.NotFound, "redis: no policy document for the service")

// PolicyStore keeps each service's traffic policy document (package
// github.com/fleetrpc/fleet/policy) under one Redis key,
// Config.PolicyPrefix + ":" + service, without expiry. Put writes the key
// and publishes on the channel of the same name; Watch subscribes to that
// channel and also reads the key every Config.PollInterval, so a change
// made while a watcher was cut off is seen once it is back. It is a
// policy.Store without this module depending on the policy module. Safe
// for concurrent use.
type PolicyStore struct {
	d *Discovery // the client, its lifetime and its logger
}

// NewPolicyStore returns a PolicyStore using cfg (its Addr or Client,
// credentials, PolicyPrefix and PollInterval). It does not connect yet.
func NewPolicyStore(cfg Config) (*PolicyStore, error) {
	d, err := NewDiscovery(cfg)
	if err != nil {
		return nil, err
	}
	return &PolicyStore{d: d}, nil
}

func (s *PolicyStore) key(service string) string { return s.d.cfg.PolicyPrefix + ":" + service }

// Get returns service's document, or ErrNoPolicy, or an error with code
// Unavailable when Redis cannot be reached.
func (s *PolicyStore) Get(ctx context.Context, service string) ([]byte, error) {
	if err := regutil.ValidateService(service); err != nil {
		return nil, fleet.WrapError(fleet.InvalidArgument, err)
	}
	b, err := s.d.client.Get(ctx, s.key(service)).Bytes()
	if errors.Is(err, goredis.Nil) {
		return nil, ErrNoPolicy
	}
	if err != nil {
		return nil, fleet.Errorf(fleet.Unavailable, "redis: policy of %q: %w", service, err)
	}
	return b, nil
}

// Put replaces service's document (nil or empty deletes it) and notifies
// the watchers. Errors have code Unavailable or InvalidArgument.
func (s *PolicyStore) Put(ctx context.Context, service string, doc []byte) error {
	if err := regutil.ValidateService(service); err != nil {
		return fleet.WrapError(fleet.InvalidArgument, err)
	}
	key := s.key(service)
	_, err := s.d.client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		if len(doc) == 0 {
			p.Del(ctx, key)
		} else {
			p.Set(ctx, key, doc, 0)
		}
		p.Publish(ctx, key, "changed")
		return nil
	})
	if err != nil {
		return fleet.Errorf(fleet.Unavailable, "redis: put policy of %q: %w", service, err)
	}
	return nil
}

// Watch delivers service's document (nil when it has none) now and each
// time it changes, until ctx is done or Close is called; then the channel
// is closed. While Redis is unreachable nothing is delivered; the key is
// read again every PollInterval at most.
func (s *PolicyStore) Watch(ctx context.Context, service string) (<-chan []byte, error) {
	key := s.key(service)
	return s.d.life.WatchDoc(ctx, service, "redis", s.d.log, func(d *regutil.DocWatch) {
		ps := s.d.client.Subscribe(d.Context(), key)
		defer ps.Close()
		msgs := ps.ChannelWithSubscriptions(goredis.WithChannelSize(16))
		ticker := time.NewTicker(s.d.cfg.PollInterval)
		defer ticker.Stop()
		d.Backoff.Max = s.d.cfg.PollInterval
		d.Rounds(nil, func(ctx context.Context, _ <-chan struct{}) error {
			b, err := s.d.client.Get(ctx, key).Bytes()
			if errors.Is(err, goredis.Nil) {
				b = nil
			} else if err != nil {
				return err
			}
			if !d.Deliver(b) {
				return nil
			}
			select {
			case <-ctx.Done():
			case <-ticker.C:
			case _, ok := <-msgs:
				if !ok {
					return errors.New("subscription closed")
				}
			}
			return nil
		})
	})
}

// Close ends every watch and closes the client unless it came from
// Config.Client.
func (s *PolicyStore) Close() error { return s.d.Close() }
