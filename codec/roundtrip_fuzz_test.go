package codec_test

import (
	"bytes"
	"testing"

	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/internal/benchpb"
	"github.com/fleetrpc/fleet/internal/gencodemsg"
)

// FuzzRoundTrip checks decode→encode→decode for every built-in codec into
// its representative type (raw: []byte, protobuf: BenchmarkMessage, the
// others: Plain, a struct of strings, integers, booleans and a slice):
// whatever a codec decodes must encode, decode again, and encode to the
// same bytes the second time (the first encoding is canonical, so the
// round trip is a fixed point). The first byte of the fuzz input picks the
// codec (modulo 6). The seed corpus is in testdata/fuzz/FuzzRoundTrip.
func FuzzRoundTrip(f *testing.F) {
	plain := benchpb.Plain{Field1: "fleet", Field2: 7, Field5: []uint64{1, 2}, Field80: true}
	for _, id := range []codec.ID{codec.Raw, codec.JSON, codec.Protobuf, codec.MsgPack, codec.Gob, codec.Gencode} {
		var v any = benchpb.NewPlain()
		if id == codec.JSON || id == codec.MsgPack {
			b, _ := codec.Get(id).Marshal(&plain)
			f.Add(byte(id), b)
		}
		switch id {
		case codec.Raw:
			v = []byte("raw bytes")
		case codec.Protobuf:
			v = benchpb.New()
		case codec.Gencode:
			v = gencodemsg.New()
		}
		b, err := codec.Get(id).Marshal(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(byte(id), b)
	}
	f.Fuzz(func(t *testing.T, id byte, data []byte) {
		cid := codec.ID(id % 6)
		c := codec.Get(cid)
		fresh := func() any {
			switch cid {
			case codec.Raw:
				return new([]byte)
			case codec.Protobuf:
				return new(benchpb.BenchmarkMessage)
			case codec.Gencode:
				return new(gencodemsg.BenchmarkMessage)
			}
			return new(benchpb.Plain)
		}
		v1 := fresh()
		if err := c.Unmarshal(data, v1); err != nil {
			return
		}
		enc1, err := c.Marshal(v1)
		if err != nil {
			t.Fatalf("%s: decoded %x but cannot encode it: %v", c.Name(), data, err)
		}
		v2 := fresh()
		if err := c.Unmarshal(enc1, v2); err != nil {
			t.Fatalf("%s: own encoding %x does not decode: %v", c.Name(), enc1, err)
		}
		enc2, err := c.Marshal(v2)
		if err != nil {
			t.Fatalf("%s: second encode failed: %v", c.Name(), err)
		}
		if !bytes.Equal(enc1, enc2) {
			t.Fatalf("%s: round trip not stable: %x then %x", c.Name(), enc1, enc2)
		}
		if cid == codec.Raw && !bytes.Equal(enc1, data) {
			t.Fatalf("raw changed the bytes: %x -> %x", data, enc1)
		}
	})
}
