package server_test

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/compress"
	"github.com/fleetrpc/fleet/internal/bufpool"
	"github.com/fleetrpc/fleet/internal/testutil"
	"github.com/fleetrpc/fleet/protocol"
	"github.com/fleetrpc/fleet/server"
)

func authServer(t *testing.T, opts ...server.Option) (addr string, checks *atomic.Int64) {
	t.Helper()
	checks = new(atomic.Int64)
	opts = append([]server.Option{server.WithAuth(func(ctx context.Context, info *fleet.CallInfo, token string) error {
		checks.Add(1)
		if token != "s3cret" {
			return errors.New("bad token")
		}
		return nil
	})}, opts...)
	srv := server.New(opts...)
	srv.RegisterFunction("A", "Echo", func(ctx context.Context, in *[]byte, out *[]byte) error {
		*out = *in
		return nil
	})
	return testutil.Serve(t, srv), checks
}

// roundTrip sends one request frame and returns the response's status.
func (rc *hostileConn) roundTrip(frame []byte) fleet.Code {
	rc.t.Helper()
	if _, err := rc.nc.Write(frame); err != nil {
		rc.t.Fatal(err)
	}
	rc.nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	f, buf, err := rc.r.ReadFrame()
	if err != nil {
		rc.t.Fatal(err)
	}
	defer bufpool.Put(buf)
	if f.Type != protocol.TypeResponse {
		rc.t.Fatalf("got frame type %d, want a response", f.Type)
	}
	return fleet.Code(f.Status)
}

// TestAuthBeforeLookupAndDecompression: without a valid token, a call
// naming an unknown service or method, or carrying a compression bomb or a
// malformed compressed payload, is answered Unauthenticated: the server
// neither looks the method up nor looks at the payload first. With the
// token, the same requests get NotFound, ResourceExhausted and
// InvalidArgument.
func TestAuthBeforeLookupAndDecompression(t *testing.T) {
	addr, checks := authServer(t, server.WithLimits(protocol.Limits{MaxDecompressedSize: 1 << 20}))
	bomb := zstdStream(t, 8<<20)
	garbage := []byte("not a zstd frame at all")
	good := fleet.Metadata{fleet.AuthKey: "s3cret"}
	cases := []struct {
		name            string
		service, method string
		comp            compress.ID
		payload         []byte
		withToken       fleet.Code
	}{
		{"unknown service", "Nope", "Echo", 0, []byte("x"), fleet.NotFound},
		{"unknown method", "A", "Nope", 0, []byte("x"), fleet.NotFound},
		{"zstd bomb", "A", "Echo", compress.Zstd, bomb, fleet.ResourceExhausted},
		{"malformed zstd", "A", "Echo", compress.Zstd, garbage, fleet.InvalidArgument},
		{"known method", "A", "Echo", 0, []byte("x"), fleet.OK},
	}
	rc := dialHostile(t, addr)
	for i, tc := range cases {
		for _, md := range []fleet.Metadata{nil, {fleet.AuthKey: "wrong"}} {
			if got := rc.roundTrip(request(uint64(i), 0, tc.comp, tc.service, tc.method, md, tc.payload)); got != fleet.Unauthenticated {
				t.Errorf("%s, token %q: %v, want Unauthenticated", tc.name, md[fleet.AuthKey], got)
			}
		}
		if got := rc.roundTrip(request(uint64(i), 0, tc.comp, tc.service, tc.method, good, tc.payload)); got != tc.withToken {
			t.Errorf("%s, good token: %v, want %v", tc.name, got, tc.withToken)
		}
	}
	if n := checks.Load(); n != int64(3*len(cases)) {
		t.Fatalf("auth ran %d times, want %d (once per call)", n, 3*len(cases))
	}
}

// TestUnauthenticatedConnectionIsNotKeptAlive: pings on a connection that
// never authenticated are not answered, and the connection is closed after
// the auth timeout; a connection that authenticated keeps getting pongs
// after it.
func TestUnauthenticatedConnectionIsNotKeptAlive(t *testing.T) {
	const timeout = 300 * time.Millisecond
	addr, _ := authServer(t, server.WithAuthTimeout(timeout))
	ping := func(seq uint64) []byte {
		out, _ := protocol.AppendFrame(nil, &protocol.Header{Type: protocol.TypePing, Seq: seq}, "", "", nil, nil, 0)
		return out
	}

	// Never authenticated: ping until the server closes; no pong arrives.
	rc := dialHostile(t, addr)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for i := uint64(1); ; i++ {
			if _, err := rc.nc.Write(ping(i)); err != nil {
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	rc.nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	f, buf, err := rc.r.ReadFrame()
	if err == nil {
		bufpool.Put(buf)
		t.Fatalf("unauthenticated connection got a frame of type %d, want none", f.Type)
	}
	if ne, ok := err.(interface{ Timeout() bool }); ok && ne.Timeout() {
		t.Fatal("unauthenticated connection was not closed within 20 s")
	}

	// Authenticated: still served after the auth timeout has passed.
	ac := dialHostile(t, addr)
	if got := ac.roundTrip(request(1, 0, 0, "A", "Echo", fleet.Metadata{fleet.AuthKey: "s3cret"}, []byte("x"))); got != fleet.OK {
		t.Fatalf("authenticated call: %v", got)
	}
	time.Sleep(2 * timeout) // past the auth timeout; the connection must stay
	if _, err := ac.nc.Write(ping(7)); err != nil {
		t.Fatal(err)
	}
	ac.nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	f, buf, err = ac.r.ReadFrame()
	if err != nil {
		if err == io.EOF {
			t.Fatal("authenticated connection was closed by the auth timeout")
		}
		t.Fatal(err)
	}
	bufpool.Put(buf)
	if f.Type != protocol.TypePong || f.Seq != 7 {
		t.Fatalf("got type %d seq %d, want a pong for 7", f.Type, f.Seq)
	}
}
