package regutil

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/registry"
)

// WatchDoc implements the common part of a policy store's Watch (the
// policy.Source of module github.com/fleetrpc/fleet/policy, which the
// backends implement without importing it): it checks service (an error
// with code InvalidArgument), then runs loop in a goroutine until loop
// returns, ctx is done or Close is called, and returns the channel of
// loop's DocWatch, closed once the watch ends. what names the backend in
// errors and log records ("etcd"); log receives the Debug records of
// failed reads.
func (l *Life) WatchDoc(ctx context.Context, service, what string, log *slog.Logger, loop func(d *DocWatch)) (<-chan []byte, error) {
	if err := ValidateService(service); err != nil {
		return nil, fleet.WrapError(fleet.InvalidArgument, err)
	}
	wctx, cancel := l.Merge(ctx)
	out := make(chan []byte)
	d := &DocWatch{ctx: wctx, out: out, what: what, service: service, log: log}
	if err := l.Go(func() {
		defer cancel()
		defer close(out)
		loop(d)
	}); err != nil {
		cancel()
		return nil, fmt.Errorf("%s: watch policy of %q: %w", what, service, registry.ErrClosed)
	}
	return out, nil
}

// DocWatch is the sending side of one WatchDoc: it delivers a document
// only when it differs from the last one delivered, and paces the reads
// that fail. Used by the one goroutine running the loop; not safe for
// concurrent use.
type DocWatch struct {
	ctx     context.Context
	out     chan<- []byte
	what    string
	service string
	log     *slog.Logger
	last    []byte
	sent    bool
	// Backoff paces the rounds after a failed read (Rounds); its zero
	// value waits 100 ms doubling to 5 s. A loop may set Max before
	// calling Rounds.
	Backoff Backoff
}

// Context is done when the watch ends (its caller's context is done or
// the store is closed).
func (d *DocWatch) Context() context.Context { return d.ctx }

// Deliver sends doc (nil: the service has no document) unless it equals
// the last document sent; the first is always sent. It blocks until the
// watcher takes it and reports false when the watch ended first.
func (d *DocWatch) Deliver(doc []byte) bool {
	if d.sent && bytes.Equal(doc, d.last) {
		return true
	}
	select {
	case d.out <- doc:
		d.sent, d.last = true, doc
		return true
	case <-d.ctx.Done():
		return false
	}
}

// Rounds runs round until the watch ends. A round reads the document,
// passes it to Deliver, and may follow its changes (passing each to
// Deliver) until it must read again. It returns nil to be run again at
// once (and the backoff restarts), or the error that kept it from reading
// the document: that is logged at Debug (the watcher keeps its last good
// policy meanwhile), and the next round waits for the next Backoff delay,
// or until the channel wake returned before the failed round closes (a
// reconnection), whichever is first. wake may be nil; the round receives
// the channel it returned (nil when wake is nil), taken before it runs.
func (d *DocWatch) Rounds(wake func() <-chan struct{}, round func(ctx context.Context, wake <-chan struct{}) error) {
	for d.ctx.Err() == nil {
		var w <-chan struct{}
		if wake != nil {
			w = wake()
		}
		err := round(d.ctx, w)
		if err == nil {
			d.Backoff.Reset()
			continue
		}
		if d.ctx.Err() != nil {
			return
		}
		d.log.Debug("policy watch: "+d.what+" unreachable; keeping the last document", "service", d.service, "err", err)
		t := time.NewTimer(d.Backoff.Next())
		select {
		case <-t.C:
		case <-w:
		case <-d.ctx.Done():
		}
		t.Stop()
	}
}
