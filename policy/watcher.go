package policy

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/fleetrpc/fleet"
)

// Source delivers a service's policy document each time it changes. The
// registry backends implement it (etcd.PolicyStore, ...), as do File and
// Memory here. Implementations are safe for concurrent use.
type Source interface {
	// Watch delivers the service's document, starting with the current
	// one, then each new one, until ctx is done; then the channel is
	// closed. A nil (empty) delivery means the service has no document.
	// While the source is unreachable nothing is delivered: the watcher
	// keeps its last good policy.
	Watch(ctx context.Context, service string) (<-chan []byte, error)
}

// Store is a Source that can also read and write documents, for `fleet
// policy get|set` and the demo.
type Store interface {
	Source
	// Get returns the service's document, or an error with code
	// NotFound when it has none.
	Get(ctx context.Context, service string) ([]byte, error)
	// Put replaces the service's document; nil deletes it.
	Put(ctx context.Context, service string, doc []byte) error
}

// WatcherConfig configures a Watcher. The zero value works.
type WatcherConfig struct {
	// Logger receives a record for each policy applied (Info) and
	// refused (Warn). Default slog.Default().
	Logger *slog.Logger
	// Observer, when set, is told of each document applied or refused,
	// for metrics (the version in force, a refusals counter). Default
	// none.
	Observer Observer
}

// Observer receives a Watcher's events. Its methods run on the goroutine
// that applies documents (the watcher's, or Apply's caller), one at a
// time, and must be quick.
type Observer interface {
	// Applied: version is now in force ("" when the policy was removed).
	Applied(service, version string)
	// Refused: a document was refused for err; the previous policy stays.
	Refused(service string, err error)
}

// Stats is what a Watcher reports.
type Stats struct {
	// Version is the version of the policy in force, "" when none.
	Version string `json:"version"`
	// Applied counts the documents applied (deletions included), Refused
	// those refused as invalid.
	Applied int64 `json:"applied"`
	Refused int64 `json:"refused"`
	// LastError is why the last refused document was refused.
	LastError string `json:"lastError,omitempty"`
}

// Watcher follows one service's policy in a Source: each document
// delivered is decoded and checked (Parse), and then replaces the policy
// in force in one atomic step, so every call sees either the old policy
// or the new one entirely. A bad document (undecodable, invalid, or for
// another service) is refused: logged, counted, and the last good policy
// stays in force; so it does while the source is unreachable. Safe for
// concurrent use.
type Watcher struct {
	service string
	log     *slog.Logger
	obs     Observer
	cur     atomic.Pointer[Policy]
	cancel  context.CancelFunc
	done    chan struct{}

	applyMu sync.Mutex // serialises applying and the calls of subscribers
	mu      sync.Mutex
	changed chan struct{} // closed and replaced on each change
	stats   Stats
	shown   *Policy // the policy stats.Version names, for MarshalJSON
	subs    map[int]func(*Policy)
	nextSub int
}

// NewWatcher starts following service's policy in src. It returns once the
// watch is set up, without waiting for the first document (see Wait).
// Errors are those of src.Watch, with code Unavailable.
func NewWatcher(src Source, service string, cfg WatcherConfig) (*Watcher, error) {
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := src.Watch(ctx, service)
	if err != nil {
		cancel()
		return nil, fleet.Errorf(fleet.Unavailable, "policy: watch %s: %w", service, err)
	}
	w := &Watcher{service: service, log: cfg.Logger, obs: cfg.Observer, cancel: cancel, done: make(chan struct{}),
		changed: make(chan struct{}), subs: map[int]func(*Policy){}}
	if w.log == nil {
		w.log = slog.Default()
	}
	go w.run(ch)
	return w, nil
}

func (w *Watcher) run(ch <-chan []byte) {
	defer close(w.done)
	for doc := range ch {
		w.Apply(doc)
	}
}

// Apply checks doc and, when it is good, puts it in force (an empty doc
// removes the policy); else it refuses it, keeping the policy in force.
// The Watcher calls it for each document its source delivers; call it
// directly to apply a document from elsewhere. It returns why doc was
// refused (code InvalidArgument), or nil.
func (w *Watcher) Apply(doc []byte) error {
	w.applyMu.Lock()
	defer w.applyMu.Unlock()
	var p *Policy
	if len(doc) > 0 {
		var err error
		p, err = Parse(doc)
		if err == nil && p.Service() != w.service {
			err = fleet.Errorf(fleet.InvalidArgument, "policy: document is for service %q, not %q", p.Service(), w.service)
		}
		if err != nil {
			w.mu.Lock()
			w.stats.Refused++
			w.stats.LastError = err.Error()
			kept := w.stats.Version
			w.mu.Unlock()
			w.log.Warn("policy refused; the last good one stays in force", "service", w.service, "kept", kept, "error", err)
			if w.obs != nil {
				w.obs.Refused(w.service, err)
			}
			return err
		}
	}
	version := ""
	if p != nil {
		version = p.Version()
	}
	w.cur.Store(p)
	w.mu.Lock()
	subs := make([]func(*Policy), 0, len(w.subs))
	for _, f := range w.subs {
		subs = append(subs, f)
	}
	w.mu.Unlock()
	for _, f := range subs {
		f(p)
	}
	// Stats and Wait see the new version once the subscribers are done.
	w.mu.Lock()
	w.stats.Applied++
	w.stats.Version = version
	w.shown = p
	close(w.changed)
	w.changed = make(chan struct{})
	w.mu.Unlock()
	w.log.Info("policy applied", "service", w.service, "version", version)
	if w.obs != nil {
		w.obs.Applied(w.service, version)
	}
	return nil
}

// Current returns the policy in force, nil when none.
func (w *Watcher) Current() *Policy { return w.cur.Load() }

// Stats returns the version in force and the counts of documents applied
// and refused.
func (w *Watcher) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

// Service returns the service the watcher follows.
func (w *Watcher) Service() string { return w.service }

// PolicyStatus returns the service the watcher follows, the version in
// force ("" when none) and the counts of documents applied and refused
// since the watcher started, read together. Its plain types let a metrics
// exporter read a Watcher without importing this module:
// fleetprom.NewPolicyCollector (module
// github.com/fleetrpc/fleet/observability/prometheus) takes it.
func (w *Watcher) PolicyStatus() (service, version string, applied, refused int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.service, w.stats.Version, w.stats.Applied, w.stats.Refused
}

// watcherJSON is the JSON form of a Watcher.
type watcherJSON struct {
	Service string `json:"service"`
	Stats
	Policy *Document `json:"policy"`
}

// MarshalJSON encodes what the watcher has in force, read together:
//
//	{"service": "Hello", "version": "42", "applied": 3, "refused": 1,
//	 "lastError": "invalid policy: ...", "policy": {the Document in force}}
//
// "policy" is null when no policy is in force; "lastError" is left out
// when no document was refused. The admin endpoint's /policy route
// (fleetprom.AdminConfig.Policies) serves it. Safe for concurrent use.
func (w *Watcher) MarshalJSON() ([]byte, error) {
	w.mu.Lock()
	v := watcherJSON{Service: w.service, Stats: w.stats}
	if w.shown != nil {
		v.Policy = w.shown.Document()
	}
	w.mu.Unlock()
	return json.Marshal(v)
}

// Wait returns once the policy in force has the given version ("" for
// none) and the OnChange functions have run for it, or ctx's error (as a
// *fleet.Error) when ctx ends first.
func (w *Watcher) Wait(ctx context.Context, version string) error {
	for {
		w.mu.Lock()
		v, ch := w.stats.Version, w.changed
		w.mu.Unlock()
		if v == version && (version != "" || w.cur.Load() == nil) {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fleet.FromContextError(ctx.Err())
		}
	}
}

// OnChange calls f with the policy in force now and after each change
// (nil when the policy was removed), on the watcher's goroutine (or on
// Apply's caller), in order. It returns a function that stops the calls.
func (w *Watcher) OnChange(f func(*Policy)) (stop func()) {
	w.applyMu.Lock()
	defer w.applyMu.Unlock()
	w.mu.Lock()
	id := w.nextSub
	w.nextSub++
	w.subs[id] = f
	p := w.cur.Load()
	w.mu.Unlock()
	f(p)
	return func() {
		w.mu.Lock()
		delete(w.subs, id)
		w.mu.Unlock()
	}
}

// Close stops following the source; the policy in force stays readable.
func (w *Watcher) Close() error {
	w.cancel()
	<-w.done
	return nil
}
