package client_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/internal/benchpb"
	"github.com/fleetrpc/fleet/internal/bufpool"
	"github.com/fleetrpc/fleet/internal/testutil"
	"github.com/fleetrpc/fleet/protocol"
)

// rawEchoServer answers a Fleet client without Fleet's server: the Hello
// with a Hello, every request with reply (an encoded message), from one
// reused buffer, so it allocates nothing per call. It serves one
// connection and returns its address; the connection ends when the
// client closes it.
func rawEchoServer(b *testing.B, reply []byte) string {
	b.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	b.Cleanup(func() { lis.Close(); <-done })
	go func() {
		defer close(done)
		nc, err := lis.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		r := protocol.NewReader(nc, 0, protocol.Limits{})
		defer r.Close()
		hello := protocol.AppendHello(nil, &protocol.Hello{Revision: protocol.Revision, Capabilities: protocol.CapCancel | protocol.CapStreams})
		out := make([]byte, 0, 2*len(reply)+256)
		for {
			f, bp, err := r.ReadFrame()
			if err != nil {
				return
			}
			switch {
			case f.Type == protocol.TypePing && f.Flags&protocol.FlagHello != 0:
				out = protocol.AppendControl(out[:0], protocol.TypePong, protocol.FlagHello, f.Seq, hello)
			case f.Type == protocol.TypeRequest:
				h := protocol.Header{Type: protocol.TypeResponse, Codec: f.Codec, Seq: f.Seq}
				out, _ = protocol.AppendFrame(out[:0], &h, "", "", nil, reply, 0)
			default:
				out = out[:0]
			}
			bufpool.Put(bp)
			if len(out) > 0 {
				if _, err := nc.Write(out); err != nil {
					return
				}
			}
		}
	}()
	return lis.Addr().String()
}

// BenchmarkClientSide measures the client alone: Hello.Say calls with the
// 581-byte BenchmarkMessage, one at a time, against rawEchoServer, which
// allocates nothing per call. Besides allocs/op it reports
// fleet-allocs/op: the allocations per call minus the codec's (encoding
// the arguments, decoding the reply), measured apart with
// testing.AllocsPerRun. Issue 14 asks for at most 2. Sub-benchmarks:
// NoDeadline (a background context) and Deadline (a context with a
// deadline, which the request carries and the client waits on).
//
//	go test -run '^$' -bench ClientSide -benchmem ./client/
func BenchmarkClientSide(b *testing.B) {
	cd := codec.Get(codec.Protobuf)
	args := benchpb.New()
	payload, err := codec.MarshalAppend(cd, nil, args)
	if err != nil {
		b.Fatal(err)
	}
	c, err := client.Dial(context.Background(), "tcp", rawEchoServer(b, payload))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	var reply benchpb.BenchmarkMessage
	call := func(b *testing.B) {
		reply.Reset()
		if err := c.Call(ctx, "Hello", "Say", args, &reply); err != nil {
			b.Fatal(err)
		}
	}

	enc := make([]byte, 0, 2*len(payload))
	codecAllocs := testing.AllocsPerRun(200, func() {
		enc, _ = codec.MarshalAppend(cd, enc[:0], args)
		reply.Reset()
		if err := cd.Unmarshal(payload, &reply); err != nil {
			b.Fatal(err)
		}
	})

	for _, bm := range []struct {
		name     string
		deadline bool
	}{{"NoDeadline", false}, {"Deadline", true}} {
		b.Run(bm.name, func(b *testing.B) {
			ctx = context.Background()
			if bm.deadline { // one context for all calls: its cost is the caller's
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, time.Hour)
				defer cancel()
			}
			testutil.MeasureFleetAllocs(b, call, codecAllocs, "codec-allocs/op")
		})
	}
}
