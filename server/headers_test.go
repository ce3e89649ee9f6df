package server_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/server"
)

// headerSvc is a unary method setting response metadata and a trailer.
type headerSvc struct{}

func (headerSvc) Greet(ctx context.Context, args *Msg, reply *Msg) error {
	fleet.SetResponseMetadata(ctx, "h", "head")
	fleet.SetResponseMetadata(ctx, "both", "from-header")
	fleet.SetResponseTrailer(ctx, "t", "tail")
	fleet.SetResponseTrailer(ctx, "both", "from-trailer")
	reply.S = args.S
	if args.S == "fail" {
		return fleet.NewError(fleet.Aborted, "asked to fail")
	}
	return nil
}

// TestInvokeTrailer checks that a unary handler's trailer comes back in
// Call.Trailer, apart from its response metadata, on success and error,
// and that a native client gets both merged into one metadata section.
func TestInvokeTrailer(t *testing.T) {
	srv := server.New(server.WithLogger(discardLogger()))
	if err := srv.RegisterName("H", headerSvc{}); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()
	for _, s := range []string{"ok", "fail"} {
		call := &server.Call{Service: "H", Method: "Greet", Codec: codec.JSONCodec{}, Payload: []byte(`{"S":"` + s + `"}`)}
		_, md, err := srv.Invoke(ctx, call)
		if (s == "fail") != (err != nil) {
			t.Fatalf("%s: %v", s, err)
		}
		if want := (fleet.Metadata{"h": "head", "both": "from-header"}); !reflect.DeepEqual(md, want) {
			t.Fatalf("%s: response metadata %v", s, md)
		}
		if want := (fleet.Metadata{"t": "tail", "both": "from-trailer"}); !reflect.DeepEqual(call.Trailer, want) {
			t.Fatalf("%s: trailer %v", s, call.Trailer)
		}
	}

	c, err := client.InProcess(srv)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var md fleet.Metadata
	var reply Msg
	if err := c.Call(fleet.WithResponseMetadata(ctx, &md), "H", "Greet", &Msg{S: "x"}, &reply); err != nil {
		t.Fatal(err)
	}
	if want := (fleet.Metadata{"h": "head", "t": "tail", "both": "from-trailer"}); !reflect.DeepEqual(md, want) {
		t.Fatalf("native response metadata %v", md)
	}
}

// event is one thing a front end saw of a stream, in order.
type event struct {
	kind string // "header" or "msg"
	md   fleet.Metadata
	msg  string
}

// TestInvokeStreamHeader checks StreamCall.SendHeader: the response
// metadata set before the first Send goes out once, before that message
// (or at the end when none was sent); keys set later and the trailer come
// back as the trailer; without SendHeader everything is the trailer.
func TestInvokeStreamHeader(t *testing.T) {
	srv := server.New(server.WithLogger(discardLogger()))
	err := server.HandleServerStream(srv, "S", "List", func(ctx context.Context, req *Msg, st *server.ServerStream[Msg]) error {
		fleet.SetResponseMetadata(ctx, "h", "head")
		for _, r := range req.S {
			if err := st.Send(&Msg{S: string(r)}); err != nil {
				return err
			}
		}
		fleet.SetResponseMetadata(ctx, "late", "after")
		st.ResponseTrailer()["t"] = "tail"
		if req.S == "" {
			return fleet.NewError(fleet.NotFound, "nothing")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()

	run := func(in string, withHeader bool) ([]event, fleet.Metadata, error) {
		var evs []event
		m := &memStream{in: jsonMsgs(t, in)}
		call := m.call("S", "List", nil)
		call.Send = func(b []byte) error { evs = append(evs, event{kind: "msg", msg: string(b)}); return nil }
		if withHeader {
			call.SendHeader = func(md fleet.Metadata) error {
				evs = append(evs, event{kind: "header", md: copyMD(md)})
				return nil
			}
		}
		tr, err := srv.InvokeStream(ctx, call)
		return evs, tr, err
	}

	evs, tr, err := run("ab", true)
	want := []event{{kind: "header", md: fleet.Metadata{"h": "head"}}, {kind: "msg", msg: `{"S":"a"}`}, {kind: "msg", msg: `{"S":"b"}`}}
	if err != nil || !reflect.DeepEqual(evs, want) {
		t.Fatalf("with SendHeader: %v %+v", err, evs)
	}
	if want := (fleet.Metadata{"late": "after", "t": "tail"}); !reflect.DeepEqual(tr, want) {
		t.Fatalf("trailer with SendHeader: %v", tr)
	}

	evs, tr, err = run("", true)
	if fleet.CodeOf(err) != fleet.NotFound || !reflect.DeepEqual(evs, []event{{kind: "header", md: fleet.Metadata{"h": "head", "late": "after"}}}) {
		t.Fatalf("no messages: %v %+v", err, evs)
	}
	if want := (fleet.Metadata{"t": "tail"}); !reflect.DeepEqual(tr, want) {
		t.Fatalf("trailer of a stream without messages: %v", tr)
	}

	evs, tr, err = run("ab", false)
	if err != nil || len(evs) != 2 || evs[0].kind != "msg" {
		t.Fatalf("without SendHeader: %v %+v", err, evs)
	}
	if want := (fleet.Metadata{"h": "head", "late": "after", "t": "tail"}); !reflect.DeepEqual(tr, want) {
		t.Fatalf("trailer without SendHeader: %v", tr)
	}

	m := &memStream{in: jsonMsgs(t, "ab")}
	call := m.call("S", "List", nil)
	call.SendHeader = func(fleet.Metadata) error { return errors.New("client gone") }
	if _, err := srv.InvokeStream(ctx, call); fleet.CodeOf(err) != fleet.Canceled || len(m.out) != 0 {
		t.Fatalf("failing SendHeader: %v, sent %q", err, m.out)
	}
}

// copyMD copies md (nil for an empty one), as a front end copies it out.
func copyMD(md fleet.Metadata) fleet.Metadata {
	if len(md) == 0 {
		return nil
	}
	out := make(fleet.Metadata, len(md))
	for k, v := range md {
		out[k] = v
	}
	return out
}
