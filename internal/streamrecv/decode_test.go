package streamrecv_test

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/internal/benchpb"
	"github.com/fleetrpc/fleet/internal/streamrecv"
)

// TestUnmarshalNewProtobuf: decoding into a new message gives what
// proto.Unmarshal gives, and keeps its checks (malformed input, a missing
// required field).
func TestUnmarshalNewProtobuf(t *testing.T) {
	cd := codec.Get(codec.Protobuf)
	want := benchpb.New()
	b, err := proto.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	got := new(benchpb.BenchmarkMessage)
	if err := streamrecv.UnmarshalNew(cd, b, got); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, want) {
		t.Fatalf("decoded %v, want %v", got, want)
	}
	ref := new(benchpb.BenchmarkMessage)
	if err := proto.Unmarshal(b, ref); err != nil || !proto.Equal(got, ref) {
		t.Fatalf("proto.Unmarshal gave %v (%v), UnmarshalNew %v", ref, err, got)
	}

	if err := streamrecv.UnmarshalNew(cd, b[:len(b)-1], new(benchpb.BenchmarkMessage)); err == nil {
		t.Fatal("truncated message decoded without error")
	}
	partial := benchpb.New()
	partial.Field1 = nil // required
	pb, err := proto.MarshalOptions{AllowPartial: true}.Marshal(partial)
	if err != nil {
		t.Fatal(err)
	}
	if err := streamrecv.UnmarshalNew(cd, pb, new(benchpb.BenchmarkMessage)); err == nil {
		t.Fatal("message without its required field1 decoded without error")
	}
	if err := streamrecv.UnmarshalNew(cd, b, new(int)); err == nil {
		t.Fatal("protobuf decoded into an int without error")
	}
}

// TestUnmarshalNewOtherCodec: other codecs decode through their own
// Unmarshal.
func TestUnmarshalNewOtherCodec(t *testing.T) {
	type msg struct{ S string }
	cd := codec.Get(codec.JSON)
	var got msg
	if err := streamrecv.UnmarshalNew(cd, []byte(`{"S":"x"}`), &got); err != nil || got.S != "x" {
		t.Fatalf("json: %+v, %v", got, err)
	}
	if err := streamrecv.UnmarshalNew(cd, []byte(`{"S":`), new(msg)); err == nil {
		t.Fatal("malformed json decoded without error")
	}
}

// vtCounted is the benchmark message with vtprotobuf's UnmarshalVT,
// implemented through the protobuf runtime and counted.
type vtCounted struct {
	*benchpb.BenchmarkMessage
	unmarshals int
}

func (m *vtCounted) UnmarshalVT(data []byte) error {
	m.unmarshals++
	return proto.UnmarshalOptions{Merge: true}.Unmarshal(data, m.BenchmarkMessage)
}

// TestUnmarshalNewVT: a new message with vtprotobuf's UnmarshalVT is
// decoded through it, once, into the same message proto.Unmarshal gives.
func TestUnmarshalNewVT(t *testing.T) {
	want := benchpb.New()
	b, err := proto.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	got := &vtCounted{BenchmarkMessage: new(benchpb.BenchmarkMessage)}
	if err := streamrecv.UnmarshalNew(codec.Get(codec.Protobuf), b, got); err != nil {
		t.Fatal(err)
	}
	if got.unmarshals != 1 || !proto.Equal(got.BenchmarkMessage, want) {
		t.Fatalf("UnmarshalVT called %d times, decoded %v, want once and %v", got.unmarshals, got.BenchmarkMessage, want)
	}
}
