package client_test

import (
	"net"
	"testing"

	"github.com/fleetrpc/fleet/internal/bufpool"
	"github.com/fleetrpc/fleet/protocol"
)

// rawFrameServer accepts one connection on a loopback port and hands each
// frame it reads to answer, which returns the bytes to write back (nil:
// nothing) and whether to close the connection instead. It stands in for
// peers the real server cannot play: an older release, a misbehaving one.
// The listener closes when the test ends.
func rawFrameServer(t *testing.T, answer func(f protocol.Frame) (out []byte, hangUp bool)) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		nc, err := lis.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		r := protocol.NewReader(nc, 0, protocol.Limits{})
		defer r.Close()
		for {
			f, buf, err := r.ReadFrame()
			if err != nil {
				return
			}
			out, hangUp := answer(f)
			bufpool.Put(buf)
			if hangUp {
				return
			}
			if out != nil {
				nc.Write(out)
			}
		}
	}()
	t.Cleanup(func() { lis.Close(); <-done })
	return lis.Addr().String()
}
