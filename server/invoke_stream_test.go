package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/server"
)

// memStream is an in-process client side for InvokeStream: in holds the
// encoded messages Recv returns (then io.EOF), out collects what the
// handler sent.
type memStream struct {
	in  [][]byte
	out []string
}

func (m *memStream) call(svc, method string, md fleet.Metadata) *server.StreamCall {
	return &server.StreamCall{
		Service: svc, Method: method, Codec: codec.JSONCodec{}, Metadata: md,
		Recv: func() ([]byte, error) {
			if len(m.in) == 0 {
				return nil, io.EOF
			}
			b := m.in[0]
			m.in = m.in[1:]
			return b, nil
		},
		Send: func(b []byte) error { m.out = append(m.out, string(b)); return nil },
	}
}

func jsonMsgs(t *testing.T, ss ...string) [][]byte {
	var out [][]byte
	for _, s := range ss {
		b, err := json.Marshal(&Msg{S: s})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// upperStreams serves the three kinds on service "U".
type upperStreams struct{}

func (upperStreams) List(ctx context.Context, req *Msg, st *server.ServerStream[Msg]) error {
	for _, r := range req.S {
		if err := st.Send(&Msg{S: string(r)}); err != nil {
			return err
		}
	}
	if req.S == "boom" {
		panic("boom")
	}
	st.ResponseTrailer()["n"] = "done"
	return nil
}

func (upperStreams) Join(ctx context.Context, st *server.ClientStream[Msg]) (*Msg, error) {
	var b strings.Builder
	for st.Receive() {
		b.WriteString(st.Msg().S)
	}
	return &Msg{S: b.String()}, st.Err()
}

func (upperStreams) Up(ctx context.Context, st *server.BidiStream[Msg, Msg]) error {
	for {
		m, err := st.Receive()
		if err == io.EOF {
			fleet.SetResponseMetadata(ctx, "who", fleet.IncomingMetadata(ctx)["k"])
			return nil
		}
		if err != nil {
			return err
		}
		if m.S == "fail" {
			return fleet.NewError(fleet.Aborted, "asked to fail")
		}
		if err := st.Send(&Msg{S: strings.ToUpper(m.S)}); err != nil {
			return err
		}
	}
}

func TestInvokeStream(t *testing.T) {
	var intercepted atomic.Int64
	srv := server.New(server.WithLogger(discardLogger()),
		server.WithInterceptor(server.StreamInterceptorFunc(func(next server.StreamFunc) server.StreamFunc {
			return func(ctx context.Context, info *fleet.CallInfo, st server.Stream) error {
				intercepted.Add(1)
				return next(ctx, info, st)
			}
		})),
		server.WithMaxStreamMessage(64))
	if err := srv.RegisterStreams("U", upperStreams{}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	msgType := reflect.TypeFor[Msg]()
	want := []server.StreamDesc{
		{Service: "U", Method: "Join", Kind: server.ClientStreaming, ArgType: msgType, ReplyType: msgType},
		{Service: "U", Method: "List", Kind: server.ServerStreaming, ArgType: msgType, ReplyType: msgType},
		{Service: "U", Method: "Up", Kind: server.BidiStreaming, ArgType: msgType, ReplyType: msgType},
	}
	if got := srv.StreamMethods(); !reflect.DeepEqual(got, want) {
		t.Fatalf("StreamMethods: %+v", got)
	}
	if _, ok := srv.StreamMethod("U", "Nope"); ok {
		t.Fatal("StreamMethod found an unknown method")
	}
	if st, ok := srv.ServingStatus("U"); !ok || st != server.StatusServing {
		t.Fatalf("health of a service of streams only: %v %v", st, ok)
	}
	if _, ok := srv.ServingStatus("V"); ok {
		t.Fatal("health of an unknown service")
	}

	m := &memStream{in: jsonMsgs(t, "abc")}
	tr, err := srv.InvokeStream(ctx, m.call("U", "List", nil))
	if err != nil || len(m.out) != 3 || m.out[2] != `{"S":"c"}` || tr["n"] != "done" {
		t.Fatalf("List: %v %q %v", err, m.out, tr)
	}
	m = &memStream{in: jsonMsgs(t, "a", "b")}
	if _, err := srv.InvokeStream(ctx, m.call("U", "Join", nil)); err != nil || len(m.out) != 1 || m.out[0] != `{"S":"ab"}` {
		t.Fatalf("Join: %v %q", err, m.out)
	}
	m = &memStream{in: jsonMsgs(t, "x", "y")}
	tr, err = srv.InvokeStream(ctx, m.call("U", "Up", fleet.Metadata{"k": "v"}))
	if err != nil || len(m.out) != 2 || m.out[1] != `{"S":"Y"}` || tr["who"] != "v" {
		t.Fatalf("Up: %v %q %v", err, m.out, tr)
	}
	if intercepted.Load() != 3 {
		t.Fatalf("interceptor ran %d times", intercepted.Load())
	}

	for _, tc := range []struct {
		name   string
		method string
		in     [][]byte
		code   fleet.Code
	}{
		{"error mid-stream", "Up", jsonMsgs(t, "x", "fail"), fleet.Aborted},
		{"unknown", "Nope", nil, fleet.NotFound},
		{"no request", "List", nil, fleet.InvalidArgument},
		{"undecodable", "Up", [][]byte{[]byte("{")}, fleet.InvalidArgument},
		{"too large", "Up", jsonMsgs(t, strings.Repeat("z", 100)), fleet.ResourceExhausted},
		{"panic", "List", jsonMsgs(t, "boom"), fleet.Internal},
	} {
		m := &memStream{in: tc.in}
		if _, err := srv.InvokeStream(ctx, m.call("U", tc.method, nil)); fleet.CodeOf(err) != tc.code {
			t.Fatalf("%s: %v", tc.name, err)
		}
	}

	t.Run("send fails", func(t *testing.T) {
		call := (&memStream{in: jsonMsgs(t, "abc")}).call("U", "List", nil)
		call.Send = func([]byte) error { return errors.New("client gone") }
		if _, err := srv.InvokeStream(ctx, call); fleet.CodeOf(err) != fleet.Canceled {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("cancelled context", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := srv.InvokeStream(cctx, (&memStream{in: jsonMsgs(t, "abc")}).call("U", "List", nil)); fleet.CodeOf(err) != fleet.Canceled {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("auth", func(t *testing.T) {
		srv := server.New(server.WithLogger(discardLogger()), server.WithAuth(func(ctx context.Context, info *fleet.CallInfo, token string) error {
			if token != "t" {
				return errors.New("no")
			}
			return nil
		}))
		if err := srv.RegisterStreams("U", upperStreams{}); err != nil {
			t.Fatal(err)
		}
		if _, err := srv.InvokeStream(ctx, (&memStream{}).call("U", "Up", nil)); fleet.CodeOf(err) != fleet.Unauthenticated {
			t.Fatalf("without token: %v", err)
		}
		if _, err := srv.InvokeStream(ctx, (&memStream{}).call("U", "Up", fleet.Metadata{fleet.AuthKey: "t"})); err != nil {
			t.Fatalf("with token: %v", err)
		}
	})
	t.Run("shutdown", func(t *testing.T) {
		if err := srv.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := srv.InvokeStream(ctx, (&memStream{}).call("U", "Up", nil)); fleet.CodeOf(err) != fleet.ShuttingDown {
			t.Fatalf("after Shutdown: %v", err)
		}
	})
}
