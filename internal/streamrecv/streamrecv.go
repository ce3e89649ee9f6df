// Package streamrecv holds the Receive/Msg/Err loop that the receiving
// sides of Fleet's streams share: client.ServerStreamForClient and
// server.ClientStream. It owns no I/O: the stream's own recv does that.
// It must not import client or server.
package streamrecv

import "io"

// Source is one receiving side of a stream: Recv decodes the next message
// into msg (a pointer) and returns io.EOF at the stream's clean end.
type Source interface {
	Recv(msg any) error
}

// Receiver remembers the last message received and why receiving ended.
// The zero value is ready. Not safe for concurrent use, like the stream
// types that hold it.
type Receiver[T any] struct {
	msg *T
	err error
}

// Next receives the next message from src into a new T and reports
// whether there was one; after false it keeps returning false, and Err
// says why.
func (r *Receiver[T]) Next(src Source) bool {
	if r.err != nil {
		return false
	}
	m := new(T)
	if err := src.Recv(m); err != nil {
		r.err = err
		return false
	}
	r.msg = m
	return true
}

// Msg returns the message of the last successful Next.
func (r *Receiver[T]) Msg() *T { return r.msg }

// Err returns why Next returned false: nil for a clean end (io.EOF).
func (r *Receiver[T]) Err() error {
	if r.err == io.EOF {
		return nil
	}
	return r.err
}

// Ended returns the raw reason Next returned false (io.EOF included), nil
// while receiving goes on.
func (r *Receiver[T]) Ended() error { return r.err }
