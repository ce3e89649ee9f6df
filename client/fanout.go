package client

import (
	"context"
	"reflect"
	"sort"
	"sync"

	"google.golang.org/protobuf/proto"
)

// Broadcast calls method on every server at once. It succeeds only if all
// succeed; the reply is one of theirs. Otherwise it returns one of the
// errors.
func (x *XClient) Broadcast(ctx context.Context, method string, args, reply any) error {
	results, err := x.all(ctx, method, args, reply)
	if err != nil {
		return err
	}
	var firstErr error
	var ok any
	for _, r := range results {
		if r.err != nil && firstErr == nil {
			firstErr = r.err
		} else if r.err == nil && ok == nil {
			ok = r.reply
		}
	}
	if firstErr != nil {
		return firstErr
	}
	copyReply(reply, ok)
	return nil
}

// Fork calls method on every server at once and returns with the first
// successful reply; it fails only if all fail.
func (x *XClient) Fork(ctx context.Context, method string, args, reply any) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	eps := x.sortedEndpoints()
	if len(eps) == 0 {
		return notSent(ErrNoServer)
	}
	type result struct {
		reply any
		err   error
	}
	ch := make(chan result, len(eps))
	for _, ep := range eps {
		r := newReply(reply)
		go func() { ch <- result{r, x.callOne(ctx, ep, ep.breaker, method, args, r)} }()
	}
	var lastErr error
	for range eps {
		r := <-ch
		if r.err == nil {
			copyReply(reply, r.reply)
			return nil
		}
		lastErr = r.err
	}
	return lastErr
}

type fanResult struct {
	reply any
	err   error
}

func (x *XClient) all(ctx context.Context, method string, args, reply any) ([]fanResult, error) {
	eps := x.sortedEndpoints()
	if len(eps) == 0 {
		return nil, notSent(ErrNoServer)
	}
	out := make([]fanResult, len(eps))
	var wg sync.WaitGroup
	for i, ep := range eps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := newReply(reply)
			out[i] = fanResult{r, x.callOne(ctx, ep, ep.breaker, method, args, r)}
		}()
	}
	wg.Wait()
	return out, nil
}

func (x *XClient) sortedEndpoints() []*endpoint {
	m := *x.endpoints.Load()
	eps := make([]*endpoint, 0, len(m))
	for _, ep := range m {
		eps = append(eps, ep)
	}
	sort.Slice(eps, func(i, j int) bool { return eps[i].key < eps[j].key })
	return eps
}

// newReply returns a fresh value of reply's type (a pointer), or nil.
func newReply(reply any) any {
	if reply == nil {
		return nil
	}
	return reflect.New(reflect.TypeOf(reply).Elem()).Interface()
}

// copyReply copies *src into *dst (proto.Merge for messages).
func copyReply(dst, src any) {
	if dst == nil || src == nil {
		return
	}
	if dm, ok := dst.(proto.Message); ok {
		proto.Reset(dm)
		proto.Merge(dm, src.(proto.Message))
		return
	}
	reflect.ValueOf(dst).Elem().Set(reflect.ValueOf(src).Elem())
}
