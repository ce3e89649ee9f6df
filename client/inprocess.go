package client

import (
	"net"
	"reflect"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/internal/memconn"
)

// ConnServer serves the Fleet protocol on a connection handed to it,
// until the connection ends. *server.Server is one (its ServeConn method):
// InProcess takes this interface so that package client does not import
// package server.
type ConnServer interface {
	ServeConn(nc net.Conn)
}

// InProcess returns a client joined to srv in the same process, without a
// socket: the two are connected by an in-memory, buffered, full-duplex
// connection (256 KiB each way) whose addresses say "inprocess", and srv
// serves it with ServeConn on a goroutine of its own, as it serves each
// connection it accepts. Every call and stream therefore takes the path a
// network call takes, through the server's whole pipeline: connection
// limits and ConnAccept hooks, auth, rate and concurrency limits,
// deadlines, cancellation, metadata both ways, interceptors, unary,
// oneway and all three kinds of streams, encoded with the client's codec
// and compression. It is the way to test a Fleet service (docs/testing.md).
//
// opts are the options Dial takes: the codec, compression, limits,
// interceptors, auth token, heartbeat, write timeout and stream windows
// apply as they do on a network connection; WithTLS does not (there is
// nothing to encrypt), and WithDialTimeout bounds waiting for the
// server's answer to the client's Hello (default 5 s).
//
// InProcess returns once srv has answered the Hello, so a server that
// refuses the connection (shut down or closed, or at its WithMaxConns
// limit) fails it with code Unavailable, as dialing a stopped server does;
// a nil srv fails with InvalidArgument.
//
// Closing the client ends the connection on the server's side too
// (ServeConn returns); the server's Shutdown sends it a go-away and
// drains it like any connection, and its Close ends it. Safe for
// concurrent use, like every Client.
func InProcess(srv ConnServer, opts ...Option) (*Client, error) {
	if srv == nil {
		return nil, fleet.NewError(fleet.InvalidArgument, "in-process client: nil server")
	}
	if v := reflect.ValueOf(srv); v.Kind() == reflect.Pointer && v.IsNil() {
		return nil, fleet.NewError(fleet.InvalidArgument, "in-process client: nil server")
	}
	o := defaultOptions()
	for _, op := range opts {
		op.apply(&o)
	}
	cc, sc := memconn.Pipe(memconn.DefaultBuffer)
	go srv.ServeConn(sc)
	c := newClient(cc, o)
	var timeout <-chan time.Time
	if o.dialTimeout > 0 {
		t := time.NewTimer(o.dialTimeout)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-c.ext.helloDone:
	case <-timeout:
		c.Close()
		return nil, fleet.Errorf(fleet.Unavailable, "in-process client: the server did not answer within %v", o.dialTimeout)
	}
	if err := c.Err(); err != nil {
		return nil, fleet.Errorf(fleet.Unavailable, "in-process client: the server refused the connection: %w", err)
	}
	return c, nil
}
