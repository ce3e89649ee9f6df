package server_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/internal/testutil"
	"github.com/fleetrpc/fleet/server"
)

// TestAuthStreamsFirst checks streams on a server with WithAuth, over TCP,
// on connections whose first use is a stream: with the token the stream
// opens (the server answers the client's Hello before any call has
// authenticated, or the stream would wait for it forever) and keeps the
// connection past the auth timeout (a stream that passed the auth check
// authenticates its connection, as a call does); without it the stream is
// refused with Unauthenticated.
func TestAuthStreamsFirst(t *testing.T) {
	const authTimeout = 50 * time.Millisecond
	srv := server.New(
		server.WithAuthTimeout(authTimeout),
		server.WithAuth(func(ctx context.Context, info *fleet.CallInfo, token string) error {
			if token != "s3cret" {
				return errors.New("bad token")
			}
			return nil
		}))
	if err := server.HandleBidiStream(srv, "S", "Echo", func(ctx context.Context, st *server.BidiStream[int, int]) error {
		for {
			n, err := st.Receive()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			if err := st.Send(n); err != nil {
				return err
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	addr := testutil.Serve(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	for _, tc := range []struct {
		name string
		opts []client.Option
		want fleet.Code
	}{
		{"no token", nil, fleet.Unauthenticated},
		{"token", []client.Option{client.WithAuthToken("s3cret")}, fleet.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := client.Dial(ctx, "tcp", addr, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			st, err := client.CallBidiStream[int, int](ctx, c, "S", "Echo")
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			defer st.Close()
			one := 1
			if err := st.Send(&one); err != nil && tc.want == fleet.OK {
				t.Fatal(err)
			}
			got, err := st.Receive()
			if fleet.CodeOf(err) != tc.want {
				t.Fatalf("first message: %v (code %v), want code %v", err, fleet.CodeOf(err), tc.want)
			}
			if tc.want != fleet.OK {
				return
			}
			if *got != 1 {
				t.Fatalf("echo %d, want 1", *got)
			}
			// Past the auth timeout, the authenticated connection is still served.
			time.Sleep(4 * authTimeout)
			if err := st.Send(&one); err != nil {
				t.Fatalf("send after the auth timeout: %v", err)
			}
			if _, err := st.Receive(); err != nil {
				t.Fatalf("receive after the auth timeout: %v", err)
			}
		})
	}
}
