package client

import (
	"context"
	"errors"
)

// openStream opens a stream on a server chosen by the selector. When the
// open fails before reaching a server (dial failure, the server going
// away, a server without streams: errors wrapping ErrNotSent), it tries
// another server, up to the XClient's attempts (WithMaxAttempts) plus the
// re-picks every call gets, whatever the fail mode. Once a stream is
// open there is no failover: its errors go to the caller.
func (x *XClient) openStream(ctx context.Context, method string, open func(c *Client) error) error {
	a := x.pool.Get().(*attempt)
	a.ntried = 0
	a.pick.Key, _ = ctx.Value(callKeyKey{}).(string)
	defer x.pool.Put(a)
	var err error
	for i := 0; i < max(x.opts.maxAttempts, 1)+3; i++ {
		ep, cerr := x.choose(ctx, a, method)
		if cerr != nil {
			if err == nil {
				err = cerr
			}
			return err
		}
		var c *Client
		if c, err = x.client(ctx, ep); err == nil {
			if err = open(c); err == nil {
				return nil
			}
		}
		if !errors.Is(err, ErrNotSent) || ctx.Err() != nil {
			return err
		}
		if a.ntried < len(a.tried) {
			a.tried[a.ntried] = ep.key
			a.ntried++
		}
	}
	return err
}

// XCallServerStream is CallServerStream on a server x chooses, with
// failover while opening (see XClient's stream methods: no failover once
// the stream is open).
func XCallServerStream[Req, Res any](ctx context.Context, x *XClient, method string, req *Req) (*ServerStreamForClient[Res], error) {
	var st *ServerStreamForClient[Res]
	err := x.openStream(ctx, method, func(c *Client) (err error) {
		st, err = CallServerStream[Req, Res](ctx, c, x.service, method, req)
		return err
	})
	return st, err
}

// XCallClientStream is CallClientStream on a server x chooses, with
// failover while opening.
func XCallClientStream[Req, Res any](ctx context.Context, x *XClient, method string) (*ClientStreamForClient[Req, Res], error) {
	var st *ClientStreamForClient[Req, Res]
	err := x.openStream(ctx, method, func(c *Client) (err error) {
		st, err = CallClientStream[Req, Res](ctx, c, x.service, method)
		return err
	})
	return st, err
}

// XCallBidiStream is CallBidiStream on a server x chooses, with failover
// while opening.
func XCallBidiStream[Req, Res any](ctx context.Context, x *XClient, method string) (*BidiStreamForClient[Req, Res], error) {
	var st *BidiStreamForClient[Req, Res]
	err := x.openStream(ctx, method, func(c *Client) (err error) {
		st, err = CallBidiStream[Req, Res](ctx, c, x.service, method)
		return err
	})
	return st, err
}
