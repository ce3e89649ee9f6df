package server_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/fleetrpc/fleet/server"
)

// TestIdleTimeoutCutsTricklingPeer: a peer that sends a frame one byte at
// a time, never finishing it, is disconnected by the idle (read) timeout,
// while a client that keeps calling keeps its connection.
func TestIdleTimeoutCutsTricklingPeer(t *testing.T) {
	_, _, addr := newServer(t, server.WithIdleTimeout(200*time.Millisecond))
	good := dial(t, addr)
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// A 40-byte frame, of which the loop sends all but the last byte.
	frame := append([]byte{0, 0, 0, 40, 0xF1, 0xEE, 1, 1}, make([]byte, 32)...)
	closedAfter := time.Duration(-1)
	start := time.Now()
	for i := 0; i < len(frame)-1; i++ {
		if _, err := nc.Write(frame[i : i+1]); err != nil {
			closedAfter = time.Since(start)
			break
		}
		nc.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if _, err := nc.Read(make([]byte, 1)); err != nil {
			if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
				closedAfter = time.Since(start)
				break
			}
		}
		if err := good.Call(context.Background(), "Svc", "Echo", &Msg{"x"}, &Msg{}); err != nil {
			t.Fatalf("active client lost its connection: %v", err)
		}
	}
	if closedAfter < 0 {
		t.Fatal("the trickling peer was never disconnected")
	}
}
