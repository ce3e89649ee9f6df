package regutil

import (
	"context"
	"fmt"
	"sync"

	"github.com/fleetrpc/fleet/registry"
)

// Registrations is the part of a Registrar that keeps each registered
// instance alive in a goroutine of its own (etcd, Redis, NATS): it checks
// and encodes instances, tracks which are registered, starts and stops
// their keep-alive goroutines under Life, and wraps every error as
// "<Backend>: <op> <key>: <err>" ("<Backend>: <err>" for an invalid
// instance). The backend supplies what touches the registry as hooks; E is
// its state of one registered instance, typically a pointer.
//
// Set the exported fields before first use and do not change them after.
// Register, Update and Deregister are safe for concurrent use and
// serialized: no two run at once, so neither do their hooks, except Keep,
// which runs concurrently with them. Once Life is closed they fail with
// registry.ErrClosed and call no hook; Life's Close stops the keep-alive
// goroutines without deleting anything.
type Registrations[E any] struct {
	// Backend prefixes every error, as in "etcd: register <key>: ...".
	Backend string
	// Life runs the keep-alive goroutines.
	Life *Life
	// Key returns the registry key of a valid instance.
	Key func(in registry.Instance) string
	// Create writes the record of an instance that is not registered,
	// value being in's encoding, and returns its state.
	Create func(ctx context.Context, key string, in registry.Instance, value []byte) (E, error)
	// Write replaces the record of a registered instance; op is
	// "register" or "update", the method that calls it.
	Write func(ctx context.Context, op string, e E, value []byte) error
	// Keep keeps e's record alive until ctx is done; it runs in a
	// goroutine of Life from Create's success until Deregister or
	// Life's Close.
	Keep func(ctx context.Context, e E)
	// Delete removes the record of in, stored at key. e is in's state
	// when in was registered, whose Keep has then returned, else the
	// zero E.
	Delete func(ctx context.Context, key string, in registry.Instance, e E) error

	mu      sync.Mutex // serializes Register, Update, Deregister; guards entries
	entries map[string]*registration[E]
}

// registration is one registered instance and its keep-alive goroutine.
type registration[E any] struct {
	state E
	stop  context.CancelFunc // ends Keep
	done  chan struct{}      // closed when Keep has returned
}

// Register calls Write when in's key is registered, else Create, then
// starts Keep. It fails for an invalid instance, with Create's or Write's
// error, and with registry.ErrClosed once Life is closed.
func (t *Registrations[E]) Register(ctx context.Context, in registry.Instance) error {
	key, value, err := t.encode(in)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.Life.Closed() {
		return t.wrap("register", key, registry.ErrClosed)
	}
	if reg := t.entries[key]; reg != nil {
		return t.wrap("register", key, t.Write(ctx, "register", reg.state, value))
	}
	state, err := t.Create(ctx, key, in, value)
	if err != nil {
		return t.wrap("register", key, err)
	}
	kctx, stop := context.WithCancel(t.Life.Context())
	reg := &registration[E]{state: state, stop: stop, done: make(chan struct{})}
	if err := t.Life.Go(func() { defer close(reg.done); t.Keep(kctx, state) }); err != nil {
		stop()
		return t.wrap("register", key, err)
	}
	if t.entries == nil {
		t.entries = make(map[string]*registration[E])
	}
	t.entries[key] = reg
	return nil
}

// Update calls Write for in. It fails for an invalid instance, with
// registry.ErrNotRegistered for an instance not registered, with Write's
// error, and with registry.ErrClosed once Life is closed.
func (t *Registrations[E]) Update(ctx context.Context, in registry.Instance) error {
	key, value, err := t.encode(in)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.Life.Closed() {
		return t.wrap("update", key, registry.ErrClosed)
	}
	reg := t.entries[key]
	if reg == nil {
		return t.wrap("update", key, registry.ErrNotRegistered)
	}
	return t.wrap("update", key, t.Write(ctx, "update", reg.state, value))
}

// Deregister forgets in, stops its Keep and waits for it to return, then
// calls Delete, also for an instance not registered. It fails for an
// invalid instance, with Delete's error, and with registry.ErrClosed once
// Life is closed.
func (t *Registrations[E]) Deregister(ctx context.Context, in registry.Instance) error {
	if err := in.Validate(); err != nil {
		return fmt.Errorf("%s: %w", t.Backend, err)
	}
	key := t.Key(in)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.Life.Closed() {
		return t.wrap("deregister", key, registry.ErrClosed)
	}
	var state E
	if reg := t.entries[key]; reg != nil {
		delete(t.entries, key)
		reg.stop()
		<-reg.done
		state = reg.state
	}
	return t.wrap("deregister", key, t.Delete(ctx, key, in, state))
}

// encode checks in and returns its key and record.
func (t *Registrations[E]) encode(in registry.Instance) (key string, value []byte, err error) {
	if err := in.Validate(); err != nil {
		return "", nil, fmt.Errorf("%s: %w", t.Backend, err)
	}
	value, err = in.Marshal()
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", t.Backend, err)
	}
	return t.Key(in), value, nil
}

// wrap returns err, when not nil, prefixed with the backend, op and key.
func (t *Registrations[E]) wrap(op, key string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %s %s: %w", t.Backend, op, key, err)
}
