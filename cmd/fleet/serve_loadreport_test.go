package main

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetrpc/fleet/registry"
)

// lockedBuffer is a bytes.Buffer safe for one writer and one reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestDemoLoadReport: with every Arith instance draining, fleet demo
// --serve --load says that its calls fail and why; once an instance is
// active again it says they succeed again. While all calls succeed it
// prints nothing.
func TestDemoLoadReport(t *testing.T) {
	t.Setenv(tokenEnv, "test-admin-token")
	pg, err := startPlayground(context.Background(), demoFlags{selector: "weighted", failMode: "failover",
		srv: serveFlags{serve: true, addr: "127.0.0.1:0", adminAddr: "127.0.0.1:0", load: 100}})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.stop()
	var out lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	reported := make(chan struct{})
	go func() { defer close(reported); pg.reportLoad(ctx, &out, 300*time.Millisecond) }()
	defer func() { cancel(); <-reported }()

	waitFor := func(what string, ok func(string) bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !ok(out.String()); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the load reported %q", what, out.String())
			}
		}
	}
	// A healthy load: a few intervals pass without a line.
	time.Sleep(time.Second)
	if s := out.String(); s != "" {
		t.Fatalf("healthy load reported %q", s)
	}

	setArith := func(state registry.State) {
		t.Helper()
		for _, srv := range pg.servers {
			for _, pub := range srv.Publications() {
				if pub.Instance().Service != "Arith" {
					continue
				}
				uctx, ucancel := context.WithTimeout(context.Background(), 5*time.Second)
				err := pub.Update(uctx, func(in *registry.Instance) { in.State = state })
				ucancel()
				if err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	setArith(registry.Draining)
	waitFor("failures", func(s string) bool {
		return strings.Contains(s, "Arith.Add calls failed in the last 300ms; the last: Arith.Add: unavailable (14): ")
	})
	setArith(registry.Active)
	waitFor("recovery", func(s string) bool { return strings.Contains(s, "load: Arith.Add calls succeed again") })
	t.Logf("the load reported:\n%s", out.String())
}
