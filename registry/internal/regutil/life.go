package regutil

import (
	"context"
	"fmt"
	"sync"

	"github.com/fleetrpc/fleet/registry"
)

// Life ties a Registrar's or Discovery's goroutines to its Close: they run
// under Context, and Close cancels it and waits for them.
type Life struct {
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// NewLife returns a running Life.
func NewLife() *Life {
	ctx, cancel := context.WithCancel(context.Background())
	return &Life{ctx: ctx, cancel: cancel}
}

// Context is done once Close is called.
func (l *Life) Context() context.Context { return l.ctx }

// Closed reports whether Close has been called.
func (l *Life) Closed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// Go runs fn in a goroutine that Close waits for. It returns
// registry.ErrClosed, without running fn, after Close.
func (l *Life) Go(fn func()) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return registry.ErrClosed
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		fn()
	}()
	return nil
}

// Close cancels Context and waits for every goroutine started by Go. It
// reports false when Close had already been called.
func (l *Life) Close() bool {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return false
	}
	l.closed = true
	l.mu.Unlock()
	l.cancel()
	l.wg.Wait()
	return true
}

// Merge returns a context that is done when ctx is done or Close is
// called, and the function that releases it.
func (l *Life) Merge(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(l.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

// Watch implements the common part of Discovery.Watch: it checks service,
// then runs loop in a goroutine until loop returns, ctx is done or Close
// is called, and returns the channel of loop's Feed, which is closed once
// the watch ends.
func (l *Life) Watch(ctx context.Context, service string, loop func(ctx context.Context, feed *Feed)) (<-chan []registry.Instance, error) {
	if err := ValidateService(service); err != nil {
		return nil, err
	}
	wctx, cancel := l.Merge(ctx)
	feed := NewFeed()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		cancel()
		return nil, fmt.Errorf("watch %q: %w", service, registry.ErrClosed)
	}
	l.wg.Add(2)
	l.mu.Unlock()
	go func() {
		defer l.wg.Done()
		feed.Run(wctx)
	}()
	go func() {
		defer l.wg.Done()
		defer cancel()
		loop(wctx, feed)
	}()
	return feed.C(), nil
}
