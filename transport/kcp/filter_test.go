package kcp

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"
)

// queueConn is a net.PacketConn whose reads return queued datagrams.
type queueConn struct {
	net.PacketConn // nil: only ReadFrom is used
	q              [][]byte
}

func (c *queueConn) ReadFrom(p []byte) (int, net.Addr, error) {
	if len(c.q) == 0 {
		return 0, nil, io.EOF
	}
	d := c.q[0]
	c.q = c.q[1:]
	return copy(p, d), &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9}, nil
}

func (c *queueConn) SetReadDeadline(time.Time) error { return nil }

func resetDatagram(conv uint32) []byte {
	b := make([]byte, resetLen)
	copy(b, resetMagic[:])
	binary.LittleEndian.PutUint32(b[8:], conv)
	return b
}

// FuzzFilter: a datagram is either a reset, reported with its
// conversation id and never passed to kcp-go, or passed on unchanged.
func FuzzFilter(f *testing.F) {
	f.Add(resetDatagram(0xdeadbeef))
	f.Add(resetDatagram(0)[:11])
	f.Add(append(resetDatagram(7), 0))
	f.Add([]byte("FLEETKC\x01"))
	f.Add(make([]byte, 24))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1500 {
			return
		}
		var resets []uint32
		after := []byte("after")
		fc := &filterConn{
			PacketConn: &queueConn{q: [][]byte{data, after}},
			onReset:    func(_ net.Addr, conv uint32) { resets = append(resets, conv) },
		}
		buf := make([]byte, 2048)
		n, _, err := fc.ReadFrom(buf)
		if err != nil {
			t.Fatal(err)
		}
		isReset := len(data) == resetLen && bytes.Equal(data[:8], resetMagic[:])
		switch {
		case isReset:
			if len(resets) != 1 || resets[0] != binary.LittleEndian.Uint32(data[8:]) || !bytes.Equal(buf[:n], after) {
				t.Fatalf("reset %x: reported %v, then read %q", data, resets, buf[:n])
			}
		default:
			if len(resets) != 0 || !bytes.Equal(buf[:n], data) {
				t.Fatalf("datagram %x: reported %v, read %x", data, resets, buf[:n])
			}
		}
	})
}
