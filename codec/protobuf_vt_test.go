package codec_test

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/internal/benchpb"
)

// vtBench is the benchmark message with the three methods that
// protoc-gen-go-vtproto generates, implemented here through the protobuf
// runtime and counted, to see that ProtobufCodec takes that path (the real
// generated code is exercised by the bench module's vtmsg tests).
type vtBench struct {
	*benchpb.BenchmarkMessage
	sizes, marshals, unmarshals int
}

func (m *vtBench) SizeVT() int { m.sizes++; return proto.Size(m.BenchmarkMessage) }

func (m *vtBench) MarshalToSizedBufferVT(dst []byte) (int, error) {
	m.marshals++
	b, err := proto.Marshal(m.BenchmarkMessage)
	if err != nil {
		return 0, err
	}
	// Like the generated code: write at the end of dst, backwards.
	return copy(dst[len(dst)-len(b):], b), nil
}

func (m *vtBench) UnmarshalVT(data []byte) error {
	m.unmarshals++
	return proto.UnmarshalOptions{Merge: true}.Unmarshal(data, m.BenchmarkMessage)
}

// TestProtobufVTPath: a message with vtprotobuf's methods is encoded and
// decoded through them, with the bytes the protobuf runtime gives, appended
// after what dst held; Unmarshal resets the target first.
func TestProtobufVTPath(t *testing.T) {
	var c codec.ProtobufCodec
	want, err := proto.Marshal(benchpb.New())
	if err != nil {
		t.Fatal(err)
	}
	src := &vtBench{BenchmarkMessage: benchpb.New()}
	got, err := c.MarshalAppend([]byte("prefix"), src)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, append([]byte("prefix"), want...)) {
		t.Fatalf("MarshalAppend = %d bytes, want prefix + %d", len(got), len(want))
	}
	plain, err := c.Marshal(src)
	if err != nil || !bytes.Equal(plain, want) {
		t.Fatalf("Marshal = %d bytes, %v; want %d", len(plain), err, len(want))
	}
	if src.sizes != 2 || src.marshals != 2 {
		t.Fatalf("SizeVT ran %d times, MarshalToSizedBufferVT %d; want 2 and 2", src.sizes, src.marshals)
	}

	// A stale field in the target must not survive Unmarshal.
	stale := "stale"
	dst := &vtBench{BenchmarkMessage: &benchpb.BenchmarkMessage{Field9: &stale, Field5: []uint64{7}}}
	if err := c.Unmarshal(want, dst); err != nil {
		t.Fatal(err)
	}
	if dst.unmarshals != 1 {
		t.Fatalf("UnmarshalVT ran %d times, want 1", dst.unmarshals)
	}
	if !proto.Equal(dst.BenchmarkMessage, benchpb.New()) {
		t.Fatal("Unmarshal did not reset the target before UnmarshalVT")
	}
}
