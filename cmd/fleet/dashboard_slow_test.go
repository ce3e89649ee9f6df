package main

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestDashboardSlowBodies opens 300 connections to the dashboard's HTTP
// server, as fleet dashboard runs it (newDashboardServer, default
// timeouts), that send complete headers announcing a 100-byte body and
// then one byte every 2 s: every one is closed within 30 s (by the 20 s
// whole-request read timeout), while the page's API keeps answering.
func TestDashboardSlowBodies(t *testing.T) {
	d := newTestDashboard(t, &dashboardFlags{registry: "static://127.0.0.1:1", services: []string{"Arith"}})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := newDashboardServer(d.handler())
	go hs.Serve(lis)
	defer hs.Close()
	addr := lis.Addr().String()

	const conns = 300
	deadline := time.Now().Add(30 * time.Second)
	var closed atomic.Int64
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer nc.Close()
			fmt.Fprintf(nc, "POST /api/call HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n", addr)
			gone := make(chan struct{})
			go func() {
				defer close(gone)
				br := bufio.NewReader(nc)
				if resp, err := http.ReadResponse(br, nil); err == nil {
					resp.Body.Close()
					_, _ = br.ReadByte() // then the connection is closed
				}
			}()
			for {
				select {
				case <-gone:
					closed.Add(1)
					return
				case <-time.After(2 * time.Second):
				}
				if time.Now().After(deadline) {
					return
				}
				if _, err := nc.Write([]byte{' '}); err != nil {
					<-gone
					closed.Add(1)
					return
				}
			}
		})
	}
	// The API answers meanwhile.
	for range 3 {
		resp, err := http.Get("http://" + addr + "/api/methods?service=Arith")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		time.Sleep(time.Second)
	}
	wg.Wait()
	if n := closed.Load(); n != conns {
		t.Errorf("%d of %d slow-body connections closed within 30 s", n, conns)
	}
}
