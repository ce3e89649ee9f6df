package peers_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fleetrpc/fleet/bench/peers"
)

// TestLogLine checks the shipped entry is the study's 400-byte line.
func TestLogLine(t *testing.T) {
	if len(peers.LogLine) != 400 {
		t.Fatalf("log line is %d bytes, want 400", len(peers.LogLine))
	}
}

// TestPeers runs every operation of every peer in-process over TCP, with
// concurrent callers on two connections, and checks the answers.
func TestPeers(t *testing.T) {
	for _, p := range peers.Default() {
		t.Run(p.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			srv, err := p.NewServer(peers.ServerOptions{Sleep: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			served := make(chan error, 1)
			go func() { served <- srv.Serve(lis) }()

			c, err := p.Dial(ctx, lis.Addr().String(), peers.ClientOptions{Conns: 2})
			if err != nil {
				t.Fatal(err)
			}
			const callers, calls = 8, 25
			var wg sync.WaitGroup
			errs := make(chan error, callers*calls*4)
			for g := range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range calls {
						errs <- opErr(p, peers.OpEcho, c.Echo(ctx))
						a, b := int32(g*1000+i), int32(i-7)
						x, err := c.Add(ctx, a, b)
						if err == nil && x != a+b {
							t.Errorf("Add(%d, %d) = %d", a, b, x)
						}
						errs <- opErr(p, peers.OpAdd, err)
						errs <- opErr(p, peers.OpLog, c.Log(ctx))
						errs <- opErr(p, peers.OpLogOneway, c.LogOneway(ctx))
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			var want int64
			if p.Has(peers.OpLog) {
				want += callers * calls * peers.LogBatchSize
			}
			if p.Has(peers.OpLogOneway) {
				want += callers * calls * peers.LogBatchSize
			}
			deadline := time.Now().Add(5 * time.Second)
			for srv.Received() != want && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			if got := srv.Received(); got != want {
				t.Errorf("server received %d log entries, want %d", got, want)
			}
			// Close only now: a oneway send returns once queued, and a
			// client need not deliver what is still queued when closed.
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if err := srv.Close(); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-served:
				if err != nil {
					t.Errorf("Serve: %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Error("Serve did not return after Close")
			}
		})
	}
}

// TestVariants checks the echo of each variant peer (Fleet registered
// another way) and that the default set leaves it out.
func TestVariants(t *testing.T) {
	var names []string
	for _, p := range peers.All() {
		if !p.Variant {
			continue
		}
		names = append(names, p.Name)
		if slices.Contains(peers.Default(), p) {
			t.Errorf("%s is in the default set", p.Name)
		}
		t.Run(p.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			srv, err := p.NewServer(peers.ServerOptions{})
			if err != nil {
				t.Fatal(err)
			}
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			served := make(chan error, 1)
			go func() { served <- srv.Serve(lis) }()
			c, err := p.Dial(ctx, lis.Addr().String(), peers.ClientOptions{Conns: 2})
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			errs := make(chan error, 8*25)
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 25 {
						errs <- c.Echo(ctx)
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			c.Close()
			srv.Close()
			select {
			case err := <-served:
				if err != nil {
					t.Errorf("Serve: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Error("Serve did not return after Close")
			}
		})
	}
	if !slices.Equal(names, []string{peers.FleetTyped, peers.FleetValue, peers.FleetVT, peers.FleetObserved, peers.FleetObservedAll, peers.FleetGencode, peers.FleetGateway}) {
		t.Errorf("variants = %v", names)
	}
}

// opErr checks that op failed with ErrUnsupported exactly when the peer
// does not offer it.
func opErr(p *peers.Peer, op peers.Op, err error) error {
	if p.Has(op) {
		return err
	}
	if !errors.Is(err, peers.ErrUnsupported) {
		return errors.New(p.Name + " " + string(op) + ": want ErrUnsupported, got " + errString(err))
	}
	return nil
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}
