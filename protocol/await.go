package protocol

import (
	"encoding/binary"
	"io"
)

// Await blocks until the first byte of the next frame can be read (or the
// stream fails: io.EOF, a deadline, a closed connection) and reports
// whether the whole frame is already buffered, so that ReadFrame will not
// wait for the network. A server uses it to tell an idle connection from a
// frame that trickles in: the idle timeout applies before Await returns,
// a shorter frame-read timeout after.
func (r *Reader) Await() (whole bool, err error) {
	if _, err := r.r.Peek(1); err != nil {
		return false, err
	}
	n := r.r.Buffered()
	if n < PrefixSize {
		return false, nil
	}
	p, err := r.r.Peek(PrefixSize)
	if err != nil {
		return false, err
	}
	return uint64(n) >= PrefixSize+uint64(binary.BigEndian.Uint32(p)), nil
}

// PeekFrameSize waits for the next frame's length prefix and returns the
// frame's size after the prefix, without consuming anything, so that a
// caller can reserve memory before ReadFrame allocates it. A size over the
// limits fails as ReadFrame would.
func (r *Reader) PeekFrameSize() (int, error) {
	p, err := r.r.Peek(PrefixSize)
	if err != nil {
		if err == io.ErrUnexpectedEOF || (err == io.EOF && len(p) > 0) {
			err = malformed("stream ended inside a length prefix")
		}
		return 0, err
	}
	return FrameSize([PrefixSize]byte(p), &r.lim)
}
