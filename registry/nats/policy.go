package nats

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/registry/internal/regutil"
)

// ErrNoPolicy is returned by PolicyStore.Get when the service has no
// policy document. It has code NotFound.
var ErrNoPolicy = fleet.NewError(fleet.NotFound, "nats: no policy document for the service")

// PolicyStore keeps each service's traffic policy document (package
// github.com/fleetrpc/fleet/policy) in the key-value bucket
// Config.PolicyBucket (created when missing, without expiry), under the
// service's name (EncodeToken). Watch follows the key with a JetStream
// key watch, restarted every Config.PollInterval and after an outage,
// so nothing is missed. It is a policy.Store without this module
// depending on the policy module. Safe for concurrent use.
type PolicyStore struct {
	s  *store // the connection, its lifetime and logger
	mu sync.Mutex
	kv jetstream.KeyValue
}

// NewPolicyStore returns a PolicyStore using cfg (its URL or Conn,
// PolicyBucket, PollInterval and RequestTimeout). It connects in the
// background: NATS need not be reachable yet.
func NewPolicyStore(cfg Config) (*PolicyStore, error) {
	s, err := newStore(cfg)
	if err != nil {
		return nil, err
	}
	return &PolicyStore{s: s}, nil
}

// bucket opens the policy bucket, creating it when missing.
func (p *PolicyStore) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.kv != nil {
		return p.kv, nil
	}
	ctx, cancel := p.s.requestContext(ctx)
	defer cancel()
	name := p.s.cfg.PolicyBucket
	kv, err := p.s.js.KeyValue(ctx, name)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = p.s.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: name, Description: "Fleet traffic policies", History: 1})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = p.s.js.KeyValue(ctx, name)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("bucket %q: %w", name, err)
	}
	p.kv = kv
	return kv, nil
}

// Get returns service's document, or ErrNoPolicy, or an error with code
// Unavailable when NATS cannot be reached.
func (p *PolicyStore) Get(ctx context.Context, service string) ([]byte, error) {
	if err := regutil.ValidateService(service); err != nil {
		return nil, fleet.WrapError(fleet.InvalidArgument, err)
	}
	kv, err := p.bucket(ctx)
	if err != nil {
		return nil, fleet.Errorf(fleet.Unavailable, "nats: policy of %q: %w", service, err)
	}
	rctx, cancel := p.s.requestContext(ctx)
	defer cancel()
	e, err := kv.Get(rctx, EncodeToken(service))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, ErrNoPolicy
	}
	if err != nil {
		return nil, fleet.Errorf(fleet.Unavailable, "nats: policy of %q: %w", service, err)
	}
	return e.Value(), nil
}

// Put replaces service's document; nil or empty deletes it. Errors have
// code Unavailable or InvalidArgument.
func (p *PolicyStore) Put(ctx context.Context, service string, doc []byte) error {
	if err := regutil.ValidateService(service); err != nil {
		return fleet.WrapError(fleet.InvalidArgument, err)
	}
	kv, err := p.bucket(ctx)
	if err != nil {
		return fleet.Errorf(fleet.Unavailable, "nats: put policy of %q: %w", service, err)
	}
	rctx, cancel := p.s.requestContext(ctx)
	defer cancel()
	if len(doc) == 0 {
		err = kv.Delete(rctx, EncodeToken(service))
	} else {
		_, err = kv.Put(rctx, EncodeToken(service), doc)
	}
	if err != nil {
		return fleet.Errorf(fleet.Unavailable, "nats: put policy of %q: %w", service, err)
	}
	return nil
}

// Watch delivers service's document (nil when it has none) now and each
// time it changes, until ctx is done or Close is called; then the channel
// is closed. While NATS is unreachable nothing is delivered.
func (p *PolicyStore) Watch(ctx context.Context, service string) (<-chan []byte, error) {
	return p.s.life.WatchDoc(ctx, service, "nats", p.s.log, func(d *regutil.DocWatch) {
		d.Rounds(nil, func(ctx context.Context, _ <-chan struct{}) error {
			return p.cycle(ctx, service, d.Deliver)
		})
	})
}

// cycle runs one key watch for PollInterval, delivering the current
// document and each change. It returns an error when the watch could
// not start or gave no initial value.
func (p *PolicyStore) cycle(ctx context.Context, service string, deliver func([]byte) bool) error {
	kv, err := p.bucket(ctx)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := kv.Watch(cctx, EncodeToken(service))
	if err != nil {
		return err
	}
	defer stop(w)
	timer := time.NewTimer(p.s.cfg.PollInterval)
	defer timer.Stop()
	var doc []byte
	initial := true
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
			if initial {
				return errors.New("no initial value within the poll interval")
			}
			return nil
		case e, ok := <-w.Updates():
			if !ok {
				return errors.New("watch closed")
			}
			if e != nil {
				doc = nil
				if e.Operation() == jetstream.KeyValuePut {
					doc = e.Value()
				}
				if initial {
					continue
				}
			}
			initial = false
			if !deliver(doc) {
				return nil
			}
		}
	}
}

// Close ends every watch and closes the connection unless it came from
// Config.Conn.
func (p *PolicyStore) Close() error {
	p.s.close()
	return nil
}
