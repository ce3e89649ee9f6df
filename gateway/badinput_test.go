package gateway_test

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/internal/demo"
)

// closedByServer writes b to a new connection and reports whether the
// server closed it (read returns EOF or a reset) within 20 s; anything it
// sends first is read and dropped.
func closedByServer(t *testing.T, addr string, b []byte) bool {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(b); err != nil {
		return true
	}
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err = io.Copy(io.Discard, c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false
	}
	return true
}

func TestBadConnections(t *testing.T) {
	_, addr := start(t, nil)
	tests := []struct {
		name string
		in   []byte
	}{
		{"unknown protocol", []byte("hello, is anyone there?\n")},
		{"TLS without a TLS config", []byte("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")},
		{"native frame with a bad header", []byte("\x00\x00\x00\x20\xF1\xEE\x09\x09\x09\x09\x09\x09\x09\x09\x09\x09\x09\x09\x09\x09\x09\x09\x09\x09\x09\x09\x09\x09\x09\x09\x09\x09\x09\x09\x09\x09")},
		// The HTTP/2 preface, then a frame whose length exceeds the
		// default max frame size (16 KiB): a connection error.
		{"malformed HTTP/2 frame", append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00)},
		{"garbage HTTP/1.1", []byte("POST /Arith/Add HTTP/1.1\r\nContent-Length: nope\r\n\r\n")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !closedByServer(t, addr, tc.in) {
				t.Fatal("the server kept the connection open")
			}
		})
	}
	// The server still serves well-behaved clients.
	c, err := client.Dial(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var sum int
	if err := c.Call(context.Background(), "Arith", "Add", &demo.Args{A: 1, B: 1}, &sum); err != nil || sum != 2 {
		t.Fatalf("after bad input: %d %v", sum, err)
	}
}
