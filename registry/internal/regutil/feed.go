package regutil

import (
	"context"
	"sync"

	"github.com/fleetrpc/fleet/registry"
)

// Feed is the sending side of a Watch channel. Backends Publish full lists
// without ever blocking; Run hands them to the consumer, keeping only the
// newest undelivered list, so a slow consumer never stalls the backend's
// event loop and always ends up with the latest list.
type Feed struct {
	c      chan []registry.Instance
	signal chan struct{}

	mu      sync.Mutex
	pending []registry.Instance
	has     bool
	last    []registry.Instance
	hasLast bool
}

// NewFeed returns a Feed whose channel C is unbuffered.
func NewFeed() *Feed {
	return &Feed{
		c:      make(chan []registry.Instance),
		signal: make(chan struct{}, 1),
	}
}

// C is the channel a Watch returns. Run closes it.
func (f *Feed) C() <-chan []registry.Instance { return f.c }

// Publish queues list for delivery, replacing any list not yet delivered.
// Unless force is set, a list equal to the last one queued is dropped, so
// polling backends can publish on every poll. Publish takes ownership of
// list.
func (f *Feed) Publish(list []registry.Instance, force bool) {
	if list == nil {
		list = []registry.Instance{}
	}
	f.mu.Lock()
	if !force && f.hasLast && Equal(list, f.last) {
		f.mu.Unlock()
		return
	}
	f.last, f.hasLast = Clone(list), true
	f.pending, f.has = list, true
	f.mu.Unlock()
	select {
	case f.signal <- struct{}{}:
	default:
	}
}

// Send queues list for delivery like Publish with force, for backends
// that know list differs from the last one (Sorted reports it), without
// comparing or copying it. Send takes ownership of list; its instances'
// Tags and Meta may be shared with other lists, which the consumer must
// not modify. A later Publish without force compares with nothing and
// delivers.
func (f *Feed) Send(list []registry.Instance) {
	if list == nil {
		list = []registry.Instance{}
	}
	f.mu.Lock()
	f.last, f.hasLast = nil, false
	f.pending, f.has = list, true
	f.mu.Unlock()
	select {
	case f.signal <- struct{}{}:
	default:
	}
}

// Run delivers published lists to C until ctx is done, then closes C.
func (f *Feed) Run(ctx context.Context) {
	defer close(f.c)
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.signal:
		}
		f.mu.Lock()
		list, ok := f.pending, f.has
		f.pending, f.has = nil, false
		f.mu.Unlock()
		if !ok {
			continue
		}
		select {
		case f.c <- list:
		case <-ctx.Done():
			return
		}
	}
}
