package vtmsg_test

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/fleetrpc/fleet/bench/vtmsg"
	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/internal/benchpb"
)

// TestWireCompatible: what Fleet's protobuf codec writes through the
// generated vtprotobuf methods is the 581-byte message the standard one
// decodes, and what the standard one writes decodes through them, both
// equal to the filled message; the generated UnmarshalVT still refuses a
// message without its required fields.
func TestWireCompatible(t *testing.T) {
	var c codec.ProtobufCodec
	vt, err := c.MarshalAppend(nil, vtmsg.New())
	if err != nil {
		t.Fatal(err)
	}
	if len(vt) != benchpb.Size {
		t.Fatalf("vtproto encoding is %d bytes, want %d", len(vt), benchpb.Size)
	}
	std := new(benchpb.BenchmarkMessage)
	if err := proto.Unmarshal(vt, std); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(std, benchpb.New()) {
		t.Fatal("the standard decoding of the vtproto bytes differs from benchpb.New()")
	}

	stdBytes, err := proto.Marshal(benchpb.New())
	if err != nil {
		t.Fatal(err)
	}
	got := new(vtmsg.BenchmarkMessage)
	if err := c.Unmarshal(stdBytes, got); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, vtmsg.New()) {
		t.Fatal("the vtproto decoding of the standard bytes differs from vtmsg.New()")
	}

	if err := c.Unmarshal(nil, new(vtmsg.BenchmarkMessage)); err == nil {
		t.Fatal("decoding an empty payload (required fields missing) succeeded")
	}
}

// BenchmarkCodec compares the codec's two paths on the echo message.
func BenchmarkCodec(b *testing.B) {
	var c codec.ProtobufCodec
	for _, tc := range []struct {
		name string
		msg  proto.Message
		new  func() proto.Message
	}{
		{"standard", benchpb.New(), func() proto.Message { return new(benchpb.BenchmarkMessage) }},
		{"vtproto", vtmsg.New(), func() proto.Message { return new(vtmsg.BenchmarkMessage) }},
	} {
		data, _ := c.Marshal(tc.msg)
		b.Run(tc.name+"/marshal", func(b *testing.B) {
			b.ReportAllocs()
			buf := make([]byte, 0, 1024)
			for b.Loop() {
				buf, _ = c.MarshalAppend(buf[:0], tc.msg)
			}
		})
		b.Run(tc.name+"/unmarshal", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := c.Unmarshal(data, tc.new()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
